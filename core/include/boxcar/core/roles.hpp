// Least-privilege group roles for one migrated schema (docs/security.md, section 2;
// docs/operations.md, "Roles"). apply_roles() creates, when missing, six NOLOGIN group
// roles named <role_prefix><name>:
//
//   migrator   owns the schema and Boxcar's objects in it (DDL, `boxcar migrate`)
//   ingress    accept: INSERT (the identity and content columns) and SELECT on the inbox
//   worker     claim, complete, fail, lease recovery: SELECT and UPDATE (the state
//              columns) on the inbox; INSERT into the outbox (and SELECT of its id, for
//              RETURNING)
//   publisher  the outbox only: SELECT and UPDATE (the state columns)
//   operator   status, dead (list, show, retry, discard, unblock) and purge: SELECT, DELETE
//              and UPDATE (the state and audit columns) on both tables and the DEAD views;
//              the console's actions, recorded in operator_actions
//   console    the operator console's reads (docs/console.md): the payload-free DEAD views,
//              the backlog figures, the ordering keys, the action record and the columns
//              of the tables its overview counts by; never a payload, metadata or header
//
// Every runtime role also reads schema_migrations (readiness) and has USAGE on the
// schema; none of them may CREATE in it. Deployments GRANT these group roles to their
// LOGIN users, and grant the worker role what the application's handlers touch.
//
// The grants are exact: each run first revokes what the runtime roles hold on Boxcar's
// objects, then grants the list above, in one transaction. Running it again is a no-op;
// after a newer migration it transfers and grants the new objects too.
#pragma once

#include <string>
#include <vector>

#include "boxcar/core/error.hpp"

namespace boxcar {

struct RolesOptions {
  /// The migrated schema whose objects get the grants. Validated with validate_schema_name().
  std::string schema = "boxcar";
  /// Roles are cluster-wide: the prefix tells apart the roles of several deployments (or
  /// tests) in one cluster. Lower-case letters, digits and '_', starting with a letter or
  /// '_', at most 40 characters.
  std::string role_prefix = "boxcar_";
};

/// The six role names for `options`, in the order migrator, ingress, worker, publisher,
/// operator, console. @throws ConfigError("roles.role_prefix") for a bad prefix.
struct RoleNames {
  std::string migrator, ingress, worker, publisher, operator_, console;
};
RoleNames role_names(const RolesOptions& options);

struct RolesReport {
  /// Roles this call created (the others existed already).
  std::vector<std::string> created{};
};

/// A role the grants need does not exist and the caller may not CREATE ROLE: a DBA has to
/// create it (NOLOGIN) or run `boxcar migrate --roles` as a role with CREATEROLE.
class RoleMissingError final : public Error {
 public:
  explicit RoleMissingError(std::string role)
      : Error("ROLE_MISSING", "role '" + role +
                                  "' does not exist and this user may not CREATE ROLE: create it (NOLOGIN) or run "
                                  "`boxcar migrate --roles` as a user with CREATEROLE"),
        role_(std::move(role)) {}
  const std::string& role() const noexcept { return role_; }

 private:
  std::string role_;
};

/// Creates the missing roles (when the caller may), makes the caller a member of the
/// migrator role when it is not one (it must be, to hand ownership over), makes the migrator role the owner of
/// the schema and of Boxcar's objects in it, and sets the grants above, in one
/// transaction on a connection of its own. Run it after migrate(), as the user that ran
/// the migrations (or a superuser). Blocks.
/// @throws RoleMissingError naming the first missing role when the caller may not create
///   it (nothing is changed); MigrationError("ROLES_NEED_MIGRATE") when the schema is not
///   migrated to this build's version; ConfigError for a bad schema name or prefix;
///   DatabaseError when a statement fails (e.g. 42501: the caller does not own the objects).
RolesReport apply_roles(const std::string& connection_string, const RolesOptions& options = {});

}  // namespace boxcar
