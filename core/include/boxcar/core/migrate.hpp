// Applies Boxcar's embedded, numbered migrations to one schema, online.
//
// Each pending migration runs in its own transaction with search_path set to the schema,
// or, when its file says `-- boxcar:no-transaction`, as one statement outside a
// transaction (CREATE INDEX CONCURRENTLY: writers keep writing while it builds), or as
// the statements its one query generates (`-- boxcar:statements-from-query`: an index
// built concurrently on each partition of a table). It is
// recorded in <schema>.schema_migrations with the SHA-256 of its text and the oldest
// binary it stays compatible with. Every statement waits at most `lock_timeout` for a
// table lock and is retried, with backoff, a bounded number of times, so a migration
// never queues the application's traffic behind it for long.
//
// Concurrent runners (several processes starting at once) serialise on an advisory lock
// keyed by the schema name, held by a dedicated session that is never silently
// re-established: a lost session fails the run instead of continuing unlocked. The wait
// for that lock is bounded. Running again is a no-op. See docs/operations.md, "Upgrades".
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <pqxx/connection>

namespace boxcar {

/// What the runner is about to apply; passed to MigrateOptions::before_step.
struct MigrationStep {
  int version = 0;
  std::string name{};
  bool transactional = true;
  /// The PostgreSQL backend that holds the migration lock and runs the step.
  int backend_pid = 0;
};

struct MigrateOptions {
  /// Schema that holds Boxcar's tables; created when missing. Validated with
  /// validate_schema_name().
  std::string schema = "boxcar";
  /// Apply migrations up to this version only; 0 = the newest embedded one.
  int target_version = 0;
  /// How long to wait for another runner's migration lock before MIGRATION_LOCK_BUSY.
  std::chrono::milliseconds lock_wait{std::chrono::seconds(60)};
  /// How long one DDL statement waits for a table lock before it gives up and is retried
  /// (PostgreSQL's lock_timeout, set on the runner's session). Traffic that queues behind
  /// a waiting ALTER waits at most this long.
  std::chrono::milliseconds lock_timeout{std::chrono::seconds(2)};
  /// Tries per migration when its statements hit lock_timeout (or a deadlock), then
  /// MIGRATION_LOCK_TIMEOUT.
  int max_lock_attempts = 10;
  /// Backoff between those tries: full jitter, doubling from this, capped at 30 s.
  std::chrono::milliseconds retry_backoff{std::chrono::milliseconds(250)};
  /// Called before each pending migration, on the runner's thread (progress, tests).
  std::function<void(const MigrationStep&)> before_step{};
};

/// One statement of a migration that hit lock_timeout and was tried again.
struct MigrationLockRetry {
  int version = 0;
  int attempt = 0;  // the attempt that failed, 1-based
  std::chrono::milliseconds backoff{0};
  std::string reason{};  // PostgreSQL's message and the sessions holding locks
};

struct MigrationReport {
  /// Versions applied by this call, in order (empty when already up to date).
  std::vector<int> applied{};
  /// Highest version recorded after the call (may be newer than this build, when the
  /// newer migrations are marked compatible with it).
  int version = 0;
  /// Lock timeouts that were retried; each is also logged by the "migrate" logger.
  std::vector<MigrationLockRetry> lock_retries{};
  /// How long this call waited for another runner's migration lock.
  std::chrono::milliseconds lock_waited{0};
};

/// Brings `options.schema` up to the newest embedded migration (or target_version).
/// Blocks; opens and closes its own connection.
/// @throws MigrationError MIGRATION_CHECKSUM_MISMATCH when an applied file's text changed
///   (nothing is applied); MIGRATION_UNKNOWN_VERSION when the database records a newer
///   version that is not marked compatible with this build; MIGRATION_FAILED when a
///   migration's SQL fails (its transaction is rolled back; earlier ones stay applied);
///   MIGRATION_LOCK_BUSY when another session held the migration lock for all of
///   lock_wait (the message names it); MIGRATION_LOCK_TIMEOUT when a migration found its
///   tables locked on every one of max_lock_attempts tries (the message names the
///   holders); MIGRATION_LOCK_LOST when the runner's session ended mid-run (nothing more
///   is applied; run again); MIGRATION_MALFORMED for a bad directive in an embedded file;
///   MIGRATION_SCHEMA_UNSAFE when PUBLIC may CREATE in the schema (e.g. `public` in a
///   database made before PostgreSQL 15): nothing is applied.
///   DatabaseError when the database cannot be reached; ConfigError for a bad schema name.
MigrationReport migrate(const std::string& connection_string, const MigrateOptions& options = {});

/// Highest migration version embedded in this build.
int latest_migration_version();

/// Highest version applied to `options.schema`, 0 when none (or no schema).
/// @throws DatabaseError, ConfigError
int applied_migration_version(const std::string& connection_string, const MigrateOptions& options = {});

/// Whether this build may run against the schema as it is.
struct SchemaCompatibility {
  /// Highest version applied (0: none) and highest this build embeds.
  int applied_version = 0;
  int build_version = 0;
  /// True when every embedded migration is applied and every newer applied one is
  /// marked compatible with this build.
  bool compatible = false;
  /// One sentence for readiness probes and `boxcar migrate`: "migrations at version N, ...".
  std::string detail{};
};

/// Reads <schema>.schema_migrations (read-only; no lock).
/// @throws DatabaseError, ConfigError
SchemaCompatibility check_schema_compatibility(const std::string& connection_string,
                                               const MigrateOptions& options = {});
/// The same on a connection the caller keeps open (the readiness check's one session).
/// @throws DatabaseError (the connection may then be broken: reopen it), ConfigError
SchemaCompatibility check_schema_compatibility(pqxx::connection& connection, const MigrateOptions& options = {});
/// The same in the caller's open transaction (e.g. one that SET LOCALs its timeouts first);
/// does not end it.
/// @throws DatabaseError, ConfigError
SchemaCompatibility check_schema_compatibility(pqxx::transaction_base& tx, const MigrateOptions& options = {});

}  // namespace boxcar
