// libpqxx 6.4 throws some SQLSTATEs as exception types that carry no code (a deadlock is a
// transaction_rollback, which is not even an sql_error; 42501 drops its code). Every
// decision Boxcar takes on a SQLSTATE (retry a deadlocked accept_many, retry a migration
// step, classify a worker's infrastructure failure) reads it through sqlstate_of.
#include <catch2/catch.hpp>

#include <pqxx/pqxx>

#include "boxcar/core/detail/database_errors.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;

namespace {

// The server raises the SQLSTATE; libpqxx picks the exception type it maps it to.
DatabaseError raised(pqxx::connection& c, const std::string& sqlstate) {
  try {
    pqxx::nontransaction(c).exec("DO $$ BEGIN RAISE EXCEPTION 'raised for the test' USING ERRCODE = '" + sqlstate +
                                 "'; END $$");
  } catch (...) {
    return detail::to_database_error(std::current_exception(), "raising " + sqlstate, false);
  }
  FAIL("the server did not raise " << sqlstate);
  return DatabaseError("DATABASE_ERROR", "unreachable");
}

}  // namespace

TEST_CASE("every SQLSTATE a decision reads survives libpqxx's exception types") {
  TestDatabase db;
  auto c = db.connect();
  for (const std::string state : {"40P01", "40001", "40003", "40000", "42501", "53300", "53100", "55P03", "57P01"}) {
    INFO("SQLSTATE " << state);
    const DatabaseError e = raised(c, state);
    CHECK(e.sqlstate() == state);
    CHECK(e.uncertain() == false);
  }
}

TEST_CASE("a deadlock and a serialization failure are transient, a refused privilege is not") {
  TestDatabase db;
  auto c = db.connect();
  CHECK(detail::is_transient_sqlstate(raised(c, "40P01").sqlstate()));
  CHECK(detail::is_transient_sqlstate(raised(c, "40001").sqlstate()));
  CHECK_FALSE(detail::is_transient_sqlstate(raised(c, "42501").sqlstate()));
}
