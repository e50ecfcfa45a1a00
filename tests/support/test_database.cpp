// The per-test schema fixture.
#include "test_database.hpp"

#include <cstdlib>
#include <random>

#include <catch2/catch.hpp>

#include "boxcar/runtime/migrate.hpp"
#include "boxcar/runtime/sql_identifier.hpp"

namespace boxcar::testing {

std::string database_url() {
  const char* url = std::getenv("BOXCAR_TEST_DATABASE_URL");
  if (!url || !*url) FAIL("BOXCAR_TEST_DATABASE_URL is not set: run the tests with scripts/test");
  return url;
}

namespace {
std::string random_schema() {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  const char* digits = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string name = "bx_";
  for (int i = 0; i < 12; ++i) name += digits[rng() % 36];
  return name;
}
}  // namespace

TestDatabase::TestDatabase() : url_(database_url()), schema_(random_schema()) {
  migrate(url_, {.schema = schema_});
}

TestDatabase::~TestDatabase() {
  pool_.reset();
  try {
    pqxx::connection c(url_);
    pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema_) + " CASCADE");
  } catch (...) {
    // A leftover schema in a throw-away cluster is harmless.
  }
}

std::shared_ptr<ConnectionPool> TestDatabase::pool(std::size_t size) {
  if (!pool_) pool_ = ConnectionPool::create({.url = url_, .size = size});
  return pool_;
}

std::string TestDatabase::qualified(const std::string& sql) const { return with_schema(sql, schema_); }

std::int64_t TestDatabase::scalar(const std::string& sql) const {
  pqxx::connection c(url_);
  pqxx::nontransaction tx(c);
  return tx.exec1(qualified(sql))[0].as<std::int64_t>();
}

pqxx::result TestDatabase::query(const std::string& sql) const {
  pqxx::connection c(url_);
  pqxx::nontransaction tx(c);
  return tx.exec(qualified(sql));
}

}  // namespace boxcar::testing
