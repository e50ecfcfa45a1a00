// A fresh, migrated schema per test in the PostgreSQL that scripts/test started
// (BOXCAR_TEST_DATABASE_URL), dropped again when the test ends.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <pqxx/pqxx>

#include "boxcar/runtime/connection_pool.hpp"

namespace boxcar::testing {

/// The URL of the test cluster; fails the test when it is not set.
std::string database_url();

class TestDatabase {
 public:
  /// Creates schema `bx_<random>` and applies every migration to it.
  TestDatabase();
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  const std::string& url() const { return url_; }
  const std::string& schema() const { return schema_; }
  /// A pool on this database (created on first use).
  std::shared_ptr<ConnectionPool> pool(std::size_t size = 8);

  /// A new direct connection, for assertions and fault injection.
  pqxx::connection connect() const { return pqxx::connection(url_); }
  /// Runs `sql` with `{schema}` replaced by the quoted schema and returns the single
  /// integer it selects.
  std::int64_t scalar(const std::string& sql) const;
  /// Runs `sql` (with `{schema}` replaced) and returns the result.
  pqxx::result query(const std::string& sql) const;
  std::string qualified(const std::string& sql) const;

 private:
  std::string url_;
  std::string schema_;
  std::shared_ptr<ConnectionPool> pool_;
};

}  // namespace boxcar::testing
