// Tx::commit_and_reset_session: the session reset riding on the COMMIT's round trip (what
// the worker's handler transactions use). It must leave the same clean session as the
// pool's reset at the end of a loan, send no reset of its own afterwards, keep deferred
// constraints checked as the transaction left them, and never reuse a session it could
// not vouch for. The prepared-statement check runs on every
// PoolOptions::prepared_check_interval-th loan; in between, a hand-made PREPARE or
// DEALLOCATE that the pool's statements run into closes the session. Pools of size 1, so
// the next borrower is the same backend unless the pool closed it.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/tx.hpp"
#include "pool_session.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;

namespace {

// The last query text `backend` sent, as another session sees it.
std::string last_query_of(const TestDatabase& db, int backend) {
  return db.query("SELECT query FROM pg_stat_activity WHERE pid = " + std::to_string(backend))[0][0].c_str();
}

}  // namespace

TEST_CASE("commit_and_reset_session leaves a clean session and sends nothing after its COMMIT") {
  TestDatabase db;
  ensure_role(db, "boxcar_pool_test_role");
  auto pool = pool_of_one(db);
  const int backend = backend_of(*pool);
  db.query("CREATE TABLE {schema}.kept (id int)");
  {
    Tx tx = pool->begin();
    tx.exec(db.qualified("INSERT INTO {schema}.kept VALUES (1)"));
    CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 41)[0][0].as<int>() == 42);
    tx.exec("SET statement_timeout = '1234ms'");
    tx.exec("CREATE TEMP TABLE scratch (id int)");
    tx.exec("SELECT pg_advisory_lock(4244)");
    tx.exec("LISTEN boxcar_commit_reset_channel");
    tx.exec("DECLARE held CURSOR WITH HOLD FOR SELECT 1");
    tx.exec("SET ROLE boxcar_pool_test_role");
    tx.commit_and_reset_session();
    // Reset before the loan ends: the advisory lock is free already.
    auto other = db.connect();
    CHECK(pqxx::nontransaction(other).exec("SELECT pg_try_advisory_lock(4244)")[0][0].as<bool>());
  }
  // The loan ended without a reset round trip of its own: the session's last query is the
  // commit string, not the pool's reset (which ends by listing prepared statements).
  const std::string last = last_query_of(db, backend);
  CHECK(last.starts_with("SET CONSTRAINTS ALL IMMEDIATE;"));
  CHECK(last.ends_with("COMMIT"));
  CHECK(db.scalar("SELECT count(*) FROM {schema}.kept") == 1);

  Tx tx = pool->begin();
  CHECK(tx.connection().backendpid() == backend);  // reset, not replaced
  const auto row = tx.exec(
      "SELECT current_setting('statement_timeout'), to_regclass('pg_temp.scratch') IS NULL, "
      "current_user = session_user, "
      "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()), "
      "(SELECT count(*) FROM pg_listening_channels()), (SELECT count(*) FROM pg_cursors WHERE name = 'held')")[0];
  CHECK(row[0].as<std::string>() != "1234ms");
  CHECK(row[1].as<bool>());
  CHECK(row[2].as<bool>());
  CHECK(row[3].as<int>() == 0);
  CHECK(row[4].as<int>() == 0);
  CHECK(row[5].as<int>() == 0);
  // The pool's prepared statement is still registered once and still works.
  CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 1)[0][0].as<int>() == 2);
  CHECK(tx.exec("SELECT count(*) FROM pg_prepared_statements WHERE name = 'test.answer'")[0][0].as<int>() == 1);
  tx.commit();
}

TEST_CASE("commit_and_reset_session runs deferred constraint triggers with the transaction's settings") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  db.query("CREATE TABLE {schema}.seen (setting text, who text)");
  db.query("CREATE TABLE {schema}.watched (id int)");
  db.query(
      "CREATE FUNCTION {schema}.record_setting() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "INSERT INTO " +
      db.qualified("{schema}") +
      ".seen VALUES (current_setting('boxcar_test.tenant', true), current_user); RETURN NULL; END $$");
  db.query(
      "CREATE CONSTRAINT TRIGGER watched_deferred AFTER INSERT ON {schema}.watched "
      "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {schema}.record_setting()");
  Tx tx = pool->begin();
  tx.exec("SET LOCAL boxcar_test.tenant = 'tenant-7'");
  tx.exec(db.qualified("INSERT INTO {schema}.watched VALUES (1)"));
  tx.commit_and_reset_session();
  // At COMMIT the setting would still have been 'tenant-7'; the reset must not run first.
  const auto seen = db.query("SELECT setting FROM {schema}.seen");
  REQUIRE(seen.size() == 1);
  CHECK(seen[0][0].as<std::string>() == "tenant-7");
}

TEST_CASE("a deferred constraint that fails in commit_and_reset_session commits nothing and closes the session") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  db.query("CREATE TABLE {schema}.parent (id int PRIMARY KEY)");
  db.query("CREATE TABLE {schema}.child (parent int REFERENCES {schema}.parent DEFERRABLE INITIALLY DEFERRED)");
  const int backend = backend_of(*pool);
  {
    Tx tx = pool->begin();
    tx.exec(db.qualified("INSERT INTO {schema}.child VALUES (99)"));  // no parent 99: fails when checked
    try {
      tx.commit_and_reset_session();
      FAIL("the commit succeeded despite the foreign key");
    } catch (const DatabaseError& e) {
      CHECK_FALSE(e.uncertain());
    }
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.child") == 0);
  // The server was left in an aborted transaction block: a new session serves next.
  Tx tx = pool->begin();
  CHECK(tx.connection().backendpid() != backend);
  CHECK(tx.exec("SELECT 1")[0][0].as<int>() == 1);
  tx.commit();
}

TEST_CASE("a statement prepared by hand closes the session at its next prepared-statement check") {
  TestDatabase db;
  auto pool = pool_of_one(db, 2);
  const int backend = backend_of(*pool);  // a plain commit: the check ran as that loan ended
  {
    Tx tx = pool->begin();
    tx.exec("PREPARE handmade AS SELECT 1");
    tx.commit_and_reset_session();
  }
  // The first loan since the check was reset by its COMMIT, unchecked.
  CHECK(last_query_of(db, backend).ends_with("COMMIT"));
  {
    Tx tx = pool->begin();
    CHECK(tx.connection().backendpid() == backend);
    CHECK(tx.exec("SELECT count(*) FROM pg_prepared_statements WHERE name = 'handmade'")[0][0].as<int>() == 1);
    // The second is due: it commits plainly and the reset at the end of the loan lists
    // the statements, finds the hand-made one and closes the session.
    tx.commit_and_reset_session();
  }
  Tx tx = pool->begin();
  CHECK(tx.connection().backendpid() != backend);
  tx.exec("PREPARE handmade AS SELECT 2");  // would fail with 42P05 on the old session
  CHECK(tx.exec("EXECUTE handmade")[0][0].as<int>() == 2);
  tx.exec("DEALLOCATE handmade");
  tx.commit();
}

TEST_CASE("with a prepared-statement check due, commit_and_reset_session commits plainly and the loan's reset checks") {
  TestDatabase db;
  auto pool = pool_of_one(db, 1);
  const int backend = backend_of(*pool);
  {
    Tx tx = pool->begin();
    CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 1)[0][0].as<int>() == 2);
    tx.exec("SET work_mem = '77MB'");
    tx.commit_and_reset_session();
  }
  // The session's last query is the pool's reset, which ends by listing the statements.
  CHECK(last_query_of(db, backend).ends_with("SELECT name FROM pg_catalog.pg_prepared_statements"));
  Tx tx = pool->begin();
  CHECK(tx.connection().backendpid() == backend);
  CHECK(tx.exec("SELECT current_setting('work_mem')")[0][0].as<std::string>() != "77MB");
  CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 41)[0][0].as<int>() == 42);
  tx.commit();
}

// A loan that `tampers` with the session's prepared statements and commits with the reset
// (no check: the interval is 32), then a loan on the same session whose run of the pool's
// statement fails with `sqlstate`, then a fresh session on which it works.
static void expect_pool_statement_to_fail_and_close_the_session(const std::function<void(Tx&)>& tamper,
                                                                const std::string& sqlstate) {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const int backend = backend_of(*pool);
  {
    Tx tx = pool->begin();
    tamper(tx);
    tx.commit_and_reset_session();
  }
  {
    Tx tx = pool->begin();
    CHECK(tx.connection().backendpid() == backend);
    try {
      tx.exec_prepared("test.answer", "SELECT $1::int + 1", 1);
      FAIL("the pool's statement ran on a session whose prepared statements were changed by hand");
    } catch (const pqxx::sql_error& e) {
      CHECK(e.sqlstate() == sqlstate);
    }
  }
  Tx tx = pool->begin();
  CHECK(tx.connection().backendpid() != backend);
  CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 41)[0][0].as<int>() == 42);
  tx.commit();
}

TEST_CASE("a statement prepared by hand under a name the pool prepares later closes the session when they collide") {
  expect_pool_statement_to_fail_and_close_the_session([](Tx& tx) { tx.exec("PREPARE \"test.answer\" AS SELECT 0"); },
                                                      "42P05");
}

TEST_CASE("a statement of the pool's deallocated by hand closes the session when the pool next runs it") {
  expect_pool_statement_to_fail_and_close_the_session(
      [](Tx& tx) {
        CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 1)[0][0].as<int>() == 2);
        tx.exec("DEALLOCATE ALL");
      },
      "26000");
}

TEST_CASE("commit_and_reset_session on a Boxcar-only loan is a plain commit") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const int backend = backend_of(*pool);
  {
    Tx tx = pool->begin(LoanUse::BoxcarOnly);
    tx.exec("SET work_mem = '77MB'");  // what Boxcar's own statements never do
    tx.commit_and_reset_session();
  }
  CHECK(last_query_of(db, backend) == "COMMIT");
  Tx tx = pool->begin();
  CHECK(tx.exec("SELECT current_setting('work_mem')")[0][0].as<std::string>() == "77MB");
  tx.commit();
}
