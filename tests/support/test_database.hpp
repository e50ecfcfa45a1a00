// A fresh, migrated schema per test in the PostgreSQL that scripts/test started
// (BOXCAR_TEST_DATABASE_URL), dropped again when the test ends: the public
// boxcar::testing::TestSchema, so Boxcar's own tests exercise the kit applications use.
// This layer only adds what is Catch-specific.
#pragma once

#include <cstdint>
#include <string>

#include "boxcar/testing/testing.hpp"

namespace boxcar::testing {

/// The URL of the test cluster; fails the test when it is not set.
std::string database_url();

class TestDatabase : public TestSchema {
 public:
  /// A fresh schema, migrated; FAILs the test when BOXCAR_TEST_DATABASE_URL is not set.
  TestDatabase() : TestSchema(database_url()) {}

  /// The single integer `sql` selects (TestSchema::count()).
  std::int64_t scalar(const std::string& sql) const { return count(sql); }
};

}  // namespace boxcar::testing
