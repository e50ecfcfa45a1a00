// The migration runner: a dedicated session holding the schema's advisory lock, checksum
// and compatibility verification, and each pending migration applied with a bounded
// lock_timeout, retried with backoff, in its own transaction or, for CREATE INDEX
// CONCURRENTLY, as one statement outside any, or one built per statement its query
// generates (a statements-from-query step).
#include <pqxx/pqxx>

#include "boxcar/core/migrate.hpp"

#include <spdlog/spdlog.h>

#include <map>
#include <memory>
#include <optional>
#include <thread>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/detail/migration_file.hpp"
#include "boxcar/core/detail/migration_session.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "core_queries.hpp"
#include "migration_lock.hpp"

namespace boxcar {
namespace {

using detail::MigrationFile;
namespace sql = detail::core_sql;

struct AppliedMigration {
  std::string checksum;
  int compatible_with;  // the version itself for rows written before the column existed
};

std::map<int, AppliedMigration> read_applied(pqxx::transaction_base& tx, const std::string& schema) {
  std::map<int, AppliedMigration> applied;
  if (!tx.exec_params1(sql::kMigrationsTableExists, schema)[0].as<bool>()) return applied;
  const bool has_compat =
      tx.exec_params1(sql::kColumnExists, schema, "schema_migrations", "compatible_with")[0].as<bool>();
  const auto rows =
      tx.exec(detail::with_schema(has_compat ? sql::kAppliedMigrations : sql::kAppliedMigrationsLegacy, schema));
  for (const auto& row : rows) {
    const int version = row["version"].as<int>();
    applied.emplace(version,
                    AppliedMigration{row["checksum"].as<std::string>(),
                                     row["compatible_with"].is_null() ? version : row["compatible_with"].as<int>()});
  }
  return applied;
}

std::map<int, AppliedMigration> read_applied(pqxx::connection& connection, const std::string& schema) {
  pqxx::read_transaction tx(connection);
  return read_applied(tx, schema);
}

// A connection of its own for one read, turned into DatabaseError when it cannot open.
std::unique_ptr<pqxx::connection> open_for(const std::string& connection_string, std::string_view doing) {
  try {
    return detail::open_connection(connection_string);
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), doing, false);
  }
}

// Applied versions this build does not embed, newest first, whose migration needs a
// newer binary than this one.
struct NewerApplied {
  int newest = 0;
  std::optional<std::pair<int, int>> incompatible;  // version, compatible_with
};

NewerApplied newer_applied(const std::map<int, AppliedMigration>& applied, int build_version) {
  NewerApplied out;
  for (const auto& [version, row] : applied) {
    if (version <= build_version) continue;
    out.newest = version;
    if (row.compatible_with > build_version && !out.incompatible) out.incompatible = {version, row.compatible_with};
  }
  return out;
}

std::string incompatible_message(const std::string& schema, int version, int compatible_with, int build_version) {
  return "schema '" + schema + "' has migration " + std::to_string(version) +
         " applied, which needs a Boxcar that knows migration " + std::to_string(compatible_with) +
         " or newer; this build knows up to " + std::to_string(build_version) + ": upgrade Boxcar";
}

// pqxx::failure, not sql_error: libpqxx 6.4 throws a deadlock as a transaction_rollback,
// which is no sql_error and carries no SQLSTATE (sqlstate_of restores it).
bool is_lock_wait_failure(const pqxx::failure& e) {
  const std::string state = detail::sqlstate_of(e);
  return state == "55P03" /* lock_not_available: lock_timeout */ || state == "40P01" /* deadlock_detected */;
}

bool is_session_gone(const pqxx::failure& e) {
  const std::string state = detail::sqlstate_of(e);
  return state == "57P01" || state == "57P02" || state == "57P03" || state.starts_with("08");
}

std::string first_line(std::string_view text) { return std::string(text.substr(0, text.find('\n'))); }

// Who holds locks in the schema right now, for the retry log and the final error.
std::string relation_lock_holders(pqxx::connection& connection, const std::string& schema) {
  std::string out;
  try {
    for (const auto& row : pqxx::nontransaction(connection).exec_params(sql::kRelationLockHolders, schema)) {
      if (!out.empty()) out += ", ";
      out += "pid " + row["pid"].as<std::string>() + " holds " + row["mode"].as<std::string>() + " on " +
             row["relname"].as<std::string>() + " (state '" + row["state"].as<std::string>() + "', application '" +
             row["application_name"].as<std::string>() + "')";
    }
  } catch (const pqxx::sql_error&) {
    return "unknown";
  }
  return out.empty() ? "no session any more" : out;
}

class Runner {
 public:
  Runner(pqxx::connection& connection, std::string schema, const MigrateOptions& options, MigrationReport& report)
      : connection_(connection), schema_(std::move(schema)), options_(options), report_(report) {}

  // Runs `attempt` until it gets past lock_timeout, at most max_lock_attempts times.
  template <class Attempt>
  void with_lock_retries(int version, const std::string& what, Attempt&& attempt) {
    const BackoffOptions backoff{.base = options_.retry_backoff, .cap = std::chrono::seconds(30)};
    for (int n = 1;; ++n) {
      try {
        attempt();
        return;
      } catch (const pqxx::broken_connection& e) {
        session_gone(what, e.what());
      } catch (const pqxx::failure& e) {
        if (is_session_gone(e)) session_gone(what, e.what());
        if (!is_lock_wait_failure(e)) throw;
        const std::string holders = relation_lock_holders(connection_, schema_);
        const std::string reason = first_line(e.what()) + "; " + holders;
        if (n >= options_.max_lock_attempts)
          throw MigrationError("MIGRATION_LOCK_TIMEOUT",
                               what + " in schema '" + schema_ + "' could not take its locks in " + std::to_string(n) +
                                   " tries of " + std::to_string(options_.lock_timeout.count()) +
                                   " ms (lock_timeout): " + reason + "; nothing of it was applied, run migrate again");
        const auto delay = backoff_delay(backoff, n);
        report_.lock_retries.push_back({.version = version, .attempt = n, .backoff = delay, .reason = reason});
        log_event(*logger("migrate"), LogLevel::Warn, "migration hit lock_timeout; retrying",
                  {{"schema", schema_},
                   {"version", std::to_string(version)},
                   {"attempt", std::to_string(n)},
                   {"backoff_ms", std::to_string(delay.count())},
                   {"reason", reason}});
        std::this_thread::sleep_for(delay);
      }
    }
  }

  void bootstrap() {
    with_lock_retries(0, "creating schema_migrations", [&] {
      pqxx::work tx(connection_);
      tx.exec(detail::with_schema(sql::kCreateSchema, schema_));
      tx.exec(detail::with_schema(sql::kCreateMigrationsTable, schema_));
      if (!tx.exec_params1(sql::kColumnExists, schema_, "schema_migrations", "compatible_with")[0].as<bool>())
        tx.exec(detail::with_schema(sql::kAddCompatibleWith, schema_));
      tx.commit();
    });
  }

  void apply(const MigrationFile& m) {
    if (m.transactional) {
      with_lock_retries(m.version, "migration " + m.name, [&] {
        pqxx::work tx(connection_);
        tx.exec_params(sql::kSetSearchPath, quote_identifier(schema_), true);
        run_sql(tx, m, m.sql);
        record(tx, m);
        tx.commit();
      });
      return;
    }
    if (!m.statements_from_query) {
      build_concurrently(m, m.concurrent_index, m.sql);
    } else {
      // Every generated statement is checked before the first one runs.
      std::vector<std::pair<std::string, std::string>> builds;  // index, statement
      for (const auto& statement : generate_statements(m))
        builds.emplace_back(detail::generated_concurrent_index(m.name, statement), statement);
      for (const auto& [index, statement] : builds) build_concurrently(m, index, statement);
    }
    // Recorded only after the build: a crash in between leaves a valid index that the
    // next run's IF NOT EXISTS finds, or an INVALID one that it drops first.
    with_lock_retries(m.version, "recording migration " + m.name, [&] {
      pqxx::work tx(connection_);
      record(tx, m);
      tx.commit();
    });
  }

  // Applies, in order, every migration up to `target` that is not applied yet, checking
  // before and after options.before_step that the session still holds the lock.
  void apply_pending(const detail::MigrationLock& lock, const std::vector<MigrationFile>& migrations,
                     const std::map<int, AppliedMigration>& applied, int target) {
    for (const auto& m : migrations) {
      if (m.version > target || applied.contains(m.version)) continue;
      lock.verify_held();
      if (options_.before_step)
        options_.before_step({.version = m.version,
                              .name = m.name,
                              .transactional = m.transactional,
                              .backend_pid = lock.backend_pid()});
      lock.verify_held();
      log_event(*logger("migrate"), LogLevel::Debug, "applying migration",
                {{"schema", schema_}, {"version", std::to_string(m.version)}, {"name", m.name}});
      apply(m);
      report_.applied.push_back(m.version);
    }
  }

 private:
  // One statement outside a transaction, CREATE INDEX CONCURRENTLY IF NOT EXISTS `index`
  // when `index` is set: an INVALID leftover of it (a failed or interrupted earlier build)
  // is dropped first, since IF NOT EXISTS would keep it, and PostgreSQL maintains an
  // INVALID index on every write but never uses it.
  void build_concurrently(const MigrationFile& m, const std::string& index, std::string_view statement) {
    with_lock_retries(m.version, "migration " + m.name, [&] {
      pqxx::nontransaction tx(connection_);
      if (!index.empty() && tx.exec_params1(sql::kIndexInvalid, schema_, index)[0].as<bool>()) {
        log_event(*logger("migrate"), LogLevel::Warn, "dropping an INVALID index left by an earlier build",
                  {{"schema", schema_}, {"index", index}, {"version", std::to_string(m.version)}});
        std::string drop = detail::with_schema(sql::kDropIndexConcurrently, schema_);
        drop.replace(drop.find("{index}"), 7, quote_identifier(index));
        tx.exec(drop);
      }
      run_outside_transaction(tx, m, statement);
    });
  }

  // The statements a statements-from-query step's query generates, in its order.
  std::vector<std::string> generate_statements(const MigrationFile& m) {
    std::vector<std::string> statements;
    with_lock_retries(m.version, "migration " + m.name, [&] {
      pqxx::nontransaction tx(connection_);
      statements.clear();
      for (const auto& row : run_outside_transaction(tx, m, m.sql)) {
        if (row.size() != 1 || row[0].is_null())
          throw MigrationError("MIGRATION_FAILED", "migration " + m.name + " in schema '" + schema_ +
                                                       "': its query must return one non-null text column");
        statements.push_back(row[0].as<std::string>());
      }
    });
    return statements;
  }

  pqxx::result run_outside_transaction(pqxx::nontransaction& tx, const MigrationFile& m, std::string_view text) {
    tx.exec_params(sql::kSetSearchPath, quote_identifier(schema_), false);
    pqxx::result result;
    try {
      result = run_sql(tx, m, text);
    } catch (...) {
      reset_search_path(tx);
      throw;
    }
    reset_search_path(tx);
    return result;
  }

  pqxx::result run_sql(pqxx::transaction_base& tx, const MigrationFile& m, std::string_view text) {
    try {
      return tx.exec(std::string(text));
    } catch (const pqxx::sql_error& e) {
      if (is_lock_wait_failure(e) || is_session_gone(e)) throw;
      throw MigrationError("MIGRATION_FAILED",
                           "migration " + m.name + " failed in schema '" + schema_ + "': " + e.what());
    }
  }

  static void reset_search_path(pqxx::transaction_base& tx) {
    try {
      tx.exec(sql::kResetSearchPath);
    } catch (...) {
      // The session is gone or broken; the caller's error says so.
    }
  }

  void record(pqxx::transaction_base& tx, const MigrationFile& m) {
    tx.exec_params(detail::with_schema(sql::kRecordMigration, schema_), m.version, m.name, m.checksum,
                   m.compatible_with);
  }

  [[noreturn]] void session_gone(const std::string& what, const std::string& why) {
    throw MigrationError("MIGRATION_LOCK_LOST", "the migration session of schema '" + schema_ + "' ended during " +
                                                    what + " (" + first_line(why) +
                                                    "); its lock went with it, nothing more was applied: run "
                                                    "migrate again");
  }

  pqxx::connection& connection_;
  std::string schema_;
  const MigrateOptions& options_;
  MigrationReport& report_;
};

// The version migrate() goes to: options.target_version, 0 meaning this build's latest.
int target_version(const MigrateOptions& options, int build_version) {
  const int target = options.target_version == 0 ? build_version : options.target_version;
  if (target < 0 || target > build_version)
    throw ConfigError("migrate.target_version", "must be between 0 and " + std::to_string(build_version));
  return target;
}

// Refuses a schema in which every role may CREATE (docs/security.md, section 1).
void refuse_public_create(pqxx::connection& connection, const std::string& schema) {
  pqxx::read_transaction tx(connection);
  if (tx.exec_params1(sql::kPublicMayCreate, schema)[0].as<bool>())
    throw MigrationError("MIGRATION_SCHEMA_UNSAFE",
                         "every role may CREATE in schema '" + schema +
                             "' (PUBLIC holds CREATE on it), so any role could plant a function or operator "
                             "where Boxcar's functions run: REVOKE CREATE ON SCHEMA " +
                             quote_identifier(schema) +
                             " FROM PUBLIC, or use a schema of Boxcar's own (docs/security.md, section 1)");
}

// Refuses an applied migration whose file changed since (but for a text it replaced, a
// previous checksum), and an applied newer one this build is not compatible with.
void verify_applied(const std::vector<MigrationFile>& migrations, const std::map<int, AppliedMigration>& applied,
                    const std::string& schema, int build_version) {
  std::map<int, const MigrationFile*> known;
  for (const auto& m : migrations) known.emplace(m.version, &m);
  for (const auto& [version, row] : applied) {
    const auto it = known.find(version);
    if (it == known.end()) continue;  // newer than this build: judged below
    const MigrationFile& m = *it->second;
    const bool earlier_text =
        std::find(m.previous_checksums.begin(), m.previous_checksums.end(), row.checksum) != m.previous_checksums.end();
    if (m.checksum != row.checksum && !earlier_text)
      throw MigrationError("MIGRATION_CHECKSUM_MISMATCH", "migration " + m.name + " was applied to schema '" + schema +
                                                              "' with checksum " + row.checksum +
                                                              " but the file now has " + m.checksum +
                                                              "; applied migrations must never change");
  }
  const auto newer = newer_applied(applied, build_version);
  if (newer.incompatible)
    throw MigrationError("MIGRATION_UNKNOWN_VERSION", incompatible_message(schema, newer.incompatible->first,
                                                                           newer.incompatible->second, build_version));
}

// The schema's version after a run: the highest applied before it or by it.
int highest_version(const std::map<int, AppliedMigration>& applied, const std::vector<int>& applied_now) {
  int highest = 0;
  for (const auto& [version, row] : applied) highest = std::max(highest, version);
  for (int version : applied_now) highest = std::max(highest, version);
  return highest;
}

}  // namespace

int latest_migration_version() {
  const auto all = detail::embedded_migrations();
  return all.empty() ? 0 : all.back().version;
}

int applied_migration_version(const std::string& connection_string, const MigrateOptions& options) {
  const std::string schema = validate_schema_name(options.schema);
  const auto connection = open_for(connection_string, "reading the applied migration version");
  try {
    const auto applied = read_applied(*connection, schema);
    return applied.empty() ? 0 : applied.rbegin()->first;
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "reading the applied migration version", false);
  }
}

SchemaCompatibility check_schema_compatibility(const std::string& connection_string, const MigrateOptions& options) {
  validate_schema_name(options.schema);
  return check_schema_compatibility(*open_for(connection_string, "reading the applied migrations"), options);
}

SchemaCompatibility check_schema_compatibility(pqxx::connection& connection, const MigrateOptions& options) {
  validate_schema_name(options.schema);
  std::unique_ptr<pqxx::read_transaction> tx;
  try {
    tx = std::make_unique<pqxx::read_transaction>(connection);
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "reading the applied migrations", false);
  }
  return check_schema_compatibility(*tx, options);
}

SchemaCompatibility check_schema_compatibility(pqxx::transaction_base& tx, const MigrateOptions& options) {
  const std::string schema = validate_schema_name(options.schema);
  std::map<int, AppliedMigration> applied;
  try {
    applied = read_applied(tx, schema);
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "reading the applied migrations", false);
  }
  SchemaCompatibility result;
  result.build_version = latest_migration_version();
  result.applied_version = applied.empty() ? 0 : applied.rbegin()->first;
  const std::string at = "migrations at version " + std::to_string(result.applied_version);
  const std::string build = std::to_string(result.build_version);
  for (const auto& m : detail::embedded_migrations()) {
    if (applied.contains(m.version)) continue;
    result.detail = at + ", this build expects " + build + " (migration " + std::to_string(m.version) +
                    " is not applied: run boxcar migrate)";
    return result;
  }
  const auto newer = newer_applied(applied, result.build_version);
  if (newer.incompatible) {
    result.detail =
        at + ", newer than this build (" + build + ") and not compatible with it: " +
        incompatible_message(schema, newer.incompatible->first, newer.incompatible->second, result.build_version);
    return result;
  }
  result.compatible = true;
  result.detail = newer.newest == 0 ? at + ", as this build expects"
                                    : at + ", newer than this build (" + build +
                                          "); the newer migrations are marked "
                                          "compatible with it";
  return result;
}

MigrationReport migrate(const std::string& connection_string, const MigrateOptions& options) {
  const std::string schema = validate_schema_name(options.schema);
  if (options.max_lock_attempts < 1) throw ConfigError("migrate.max_lock_attempts", "must be at least 1");
  if (options.lock_timeout.count() < 1) throw ConfigError("migrate.lock_timeout", "must be at least 1 ms");
  const auto migrations = detail::embedded_migrations();
  const int build_version = migrations.empty() ? 0 : migrations.back().version;
  const int target = target_version(options, build_version);

  const auto connection = detail::open_migration_session(connection_string, options.lock_timeout);
  MigrationReport report;
  try {
    detail::MigrationLock lock(*connection, schema, options.lock_wait);
    report.lock_waited = lock.waited();
    Runner runner(*connection, schema, options, report);
    runner.bootstrap();
    refuse_public_create(*connection, schema);
    const std::map<int, AppliedMigration> applied = read_applied(*connection, schema);
    verify_applied(migrations, applied, schema, build_version);
    runner.apply_pending(lock, migrations, applied, target);
    report.version = highest_version(applied, report.applied);
    return report;
  } catch (const Error&) {
    throw;
  } catch (const pqxx::broken_connection& e) {
    throw MigrationError("MIGRATION_LOCK_LOST", "the migration session of schema '" + schema + "' ended (" +
                                                    first_line(e.what()) +
                                                    "); its lock went with it, nothing more was applied: run "
                                                    "migrate again");
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "migrating schema '" + schema + "'", false);
  }
}

}  // namespace boxcar
