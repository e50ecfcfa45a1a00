// Dropping the least-privilege roles a test created (boxcar/core/roles.hpp). Roles are
// cluster-wide and outlive a test's schema: a test that applies roles uses a prefix of
// its own (e.g. derived from its schema name) and drops them at the end.
//
//   boxcar::apply_roles(db.url(), {.schema = db.schema(), .role_prefix = db.schema() + "_"});
//   ...
//   boxcar::testing::drop_roles(db.url(), {.schema = db.schema(), .role_prefix = db.schema() + "_"});
#pragma once

#include <string>

#include "boxcar/core/roles.hpp"

namespace boxcar::testing {

/// Gives what the migrator role owns back to the connecting user, then drops the privileges
/// and the five group roles of `options` (those that exist), in one transaction. Members of
/// the roles (the test's LOGIN users) stay: drop them first. Needs CREATEROLE (the test
/// cluster's superuser). @throws DatabaseError, ConfigError
void drop_roles(const std::string& url, const RolesOptions& options);

}  // namespace boxcar::testing
