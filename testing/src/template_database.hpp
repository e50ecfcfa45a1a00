// The template database behind TestSchemaOptions::from_template: migrated once per
// server, migration set and UTC day, then copied for each test (boxcar/testing/testing.hpp).
#pragma once

#include <string>

namespace boxcar::testing {

/// Creates the database `name` on `url`'s server as a copy of the template (made first
/// when missing) and renames its schema to `name`; returns the copy's URL.
/// @throws DatabaseError, MigrationError
std::string copy_template_database(const std::string& url, const std::string& name);

/// Drops the database `name` on `url`'s server, ending the sessions still in it.
/// @throws DatabaseError
void drop_database(const std::string& url, const std::string& name);

}  // namespace boxcar::testing
