// A fresh, migrated schema per test in the PostgreSQL that scripts/test started
// (BOXCAR_TEST_DATABASE_URL), dropped again when the test ends: the public
// boxcar::testing::TestSchema, so Boxcar's own tests exercise the kit applications use.
// This layer only adds what is Catch-specific, and copies the template database by
// default (TestSchemaOptions::from_template): the tests of the migrations themselves ask
// for a schema migrated from nothing with `TestDatabase db(kMigrated);`.
#pragma once

#include <cstdint>
#include <string>

#include "boxcar/testing/testing.hpp"

namespace boxcar::testing {

/// The URL of the test cluster; fails the test when it is not set.
std::string database_url();

/// A schema created and migrated in the test cluster's own database, as an installation's.
inline constexpr TestSchemaOptions kMigrated{.from_template = false};
/// A copy of the migrated template, in a database of its own.
inline constexpr TestSchemaOptions kFromTemplate{.from_template = true};

class TestDatabase : public TestSchema {
 public:
  /// A fresh schema, copied from the template; FAILs the test when BOXCAR_TEST_DATABASE_URL
  /// is not set.
  TestDatabase() : TestSchema(database_url(), kFromTemplate) {}
  /// A fresh schema as `options` say (kMigrated: migrated from nothing in the cluster's
  /// own database).
  explicit TestDatabase(TestSchemaOptions options) : TestSchema(database_url(), options) {}

  /// The single integer `sql` selects (TestSchema::count()).
  std::int64_t scalar(const std::string& sql) const { return count(sql); }
};

}  // namespace boxcar::testing
