// The migration runner: advisory lock, checksum verification, one transaction per file.
#include <pqxx/pqxx>

#include "boxcar/core/migrate.hpp"

#include <charconv>
#include <memory>
#include <map>

#include "boxcar/migrations/detail/embedded.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "core_queries.hpp"

namespace boxcar {
namespace {

struct Migration {
  int version;
  std::string name;
  std::string_view sql;
  std::string checksum;
};

std::vector<Migration> embedded_migrations() {
  std::vector<Migration> all;
  for (const auto& file : detail::embedded_migration_files()) {
    int version = 0;
    const auto* begin = file.file_name.data();
    const auto [end, ec] = std::from_chars(begin, begin + file.file_name.size(), version);
    if (ec != std::errc{} || end == begin || version <= 0)
      throw MigrationError("MIGRATION_FAILED", "migration file name lacks a version: " + std::string(file.file_name));
    all.push_back({version, std::string(file.file_name), file.sql, sha256_hex(file.sql)});
  }
  return all;
}

class SessionLock {
 public:
  SessionLock(pqxx::connection& connection, const std::string& schema) : connection_(connection), schema_(schema) {
    pqxx::nontransaction(connection_).exec_params(detail::core_sql::kMigrateLock, schema_);
  }
  ~SessionLock() {
    try {
      pqxx::nontransaction(connection_).exec_params(detail::core_sql::kMigrateUnlock, schema_);
    } catch (...) {
      // The lock dies with the session, which closes right after.
    }
  }

 private:
  pqxx::connection& connection_;
  std::string schema_;
};

std::map<int, std::string> applied_checksums(pqxx::connection& connection, const std::string& schema) {
  pqxx::work tx(connection);
  const auto exists =
      tx.exec_params1("SELECT to_regclass(format('%I.schema_migrations', $1::text)) IS NOT NULL", schema);
  std::map<int, std::string> applied;
  if (!exists[0].as<bool>()) return applied;
  for (const auto& row : tx.exec("SELECT version, checksum FROM " + quote_identifier(schema) + ".schema_migrations"))
    applied.emplace(row["version"].as<int>(), row["checksum"].as<std::string>());
  return applied;
}

}  // namespace

int latest_migration_version() {
  const auto all = embedded_migrations();
  return all.empty() ? 0 : all.back().version;
}

int applied_migration_version(const std::string& connection_string, const MigrateOptions& options) {
  validate_schema_name(options.schema);
  std::unique_ptr<pqxx::connection> connection;
  try {
    connection = std::make_unique<pqxx::connection>(connection_string);
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "reading the applied migration version", false);
  }
  return applied_migration_version(*connection, options);
}

int applied_migration_version(pqxx::connection& connection, const MigrateOptions& options) {
  const std::string schema = validate_schema_name(options.schema);
  try {
    const auto applied = applied_checksums(connection, schema);
    return applied.empty() ? 0 : applied.rbegin()->first;
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "reading the applied migration version", false);
  }
}

MigrationReport migrate(const std::string& connection_string, const MigrateOptions& options) {
  const std::string schema = validate_schema_name(options.schema);
  const std::string qschema = quote_identifier(schema);
  const auto migrations = embedded_migrations();

  std::unique_ptr<pqxx::connection> connection;
  try {
    connection = std::make_unique<pqxx::connection>(connection_string);
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "connecting to migrate", false);
  }

  try {
    SessionLock lock(*connection, schema);
    {
      pqxx::work tx(*connection);
      tx.exec("CREATE SCHEMA IF NOT EXISTS " + qschema);
      tx.exec("CREATE TABLE IF NOT EXISTS " + qschema +
              ".schema_migrations ("
              "version integer PRIMARY KEY, "
              "name text NOT NULL, "
              "checksum text NOT NULL, "
              "applied_at timestamptz NOT NULL DEFAULT now())");
      tx.commit();
    }

    const auto applied = applied_checksums(*connection, schema);
    std::map<int, const Migration*> known;
    for (const auto& m : migrations) known.emplace(m.version, &m);
    for (const auto& [version, checksum] : applied) {
      const auto it = known.find(version);
      if (it == known.end())
        throw MigrationError("MIGRATION_UNKNOWN_VERSION",
                             "schema '" + schema + "' has migration " + std::to_string(version) +
                                 " applied, which this build does not know; upgrade Boxcar");
      if (it->second->checksum != checksum)
        throw MigrationError("MIGRATION_CHECKSUM_MISMATCH",
                             "migration " + it->second->name + " was applied to schema '" + schema +
                                 "' with checksum " + checksum + " but the file now has " + it->second->checksum +
                                 "; applied migrations must never change");
    }

    MigrationReport report;
    for (const auto& m : migrations) {
      if (applied.contains(m.version)) continue;
      pqxx::work tx(*connection);
      tx.exec("SET LOCAL search_path TO " + qschema);
      try {
        tx.exec(std::string(m.sql));
      } catch (const pqxx::sql_error& e) {
        throw MigrationError("MIGRATION_FAILED",
                             "migration " + m.name + " failed in schema '" + schema + "': " + e.what());
      }
      tx.exec_params("INSERT INTO " + qschema + ".schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                     m.version, m.name, m.checksum);
      tx.commit();
      report.applied.push_back(m.version);
    }
    report.version = migrations.empty() ? 0 : migrations.back().version;
    return report;
  } catch (const Error&) {
    throw;
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "migrating schema '" + schema + "'", false);
  }
}

}  // namespace boxcar
