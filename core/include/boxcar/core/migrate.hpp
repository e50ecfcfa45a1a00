// Applies Boxcar's embedded, numbered migrations to one schema.
//
// Each pending migration runs in its own transaction with search_path set to the
// schema, and is recorded in <schema>.schema_migrations with the SHA-256 of its text.
// Concurrent runners (several processes starting at once) serialise on an advisory lock
// keyed by the schema name. Running again is a no-op.
#pragma once

#include <string>
#include <vector>

#include <pqxx/connection>

namespace boxcar {

struct MigrateOptions {
  /// Schema that holds Boxcar's tables; created when missing. Validated with
  /// validate_schema_name().
  std::string schema = "boxcar";
};

struct MigrationReport {
  /// Versions applied by this call, in order (empty when already up to date).
  std::vector<int> applied{};
  /// Highest version recorded after the call.
  int version = 0;
};

/// Brings `options.schema` up to the newest embedded migration.
/// @throws MigrationError MIGRATION_CHECKSUM_MISMATCH when an applied file's text changed
///   (nothing is applied), MIGRATION_UNKNOWN_VERSION when the database records a version
///   this binary does not know, MIGRATION_FAILED when a migration's SQL fails (its
///   transaction is rolled back; earlier ones stay applied);
///   DatabaseError when the database cannot be reached; ConfigError for a bad schema name.
MigrationReport migrate(const std::string& connection_string, const MigrateOptions& options = {});

/// Highest migration version embedded in this build.
int latest_migration_version();

/// Highest version applied to `options.schema`, 0 when none (or no schema).
/// @throws DatabaseError, ConfigError
int applied_migration_version(const std::string& connection_string, const MigrateOptions& options = {});

/// The same on a connection the caller keeps open: a readiness check asks it on every
/// refresh through one session instead of opening one each time.
/// @throws DatabaseError (the connection may then be broken: reopen it), ConfigError
int applied_migration_version(pqxx::connection& connection, const MigrateOptions& options = {});

}  // namespace boxcar
