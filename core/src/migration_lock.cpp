// The per-schema migration lock, held by the runner's own session.
#include "migration_lock.hpp"

#include <spdlog/spdlog.h>

#include <thread>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "core_queries.hpp"

namespace boxcar::detail {
namespace {

std::string describe_holders(pqxx::connection& connection, const std::string& schema) {
  std::string out;
  for (const auto& row : pqxx::nontransaction(connection).exec_params(core_sql::kMigrateLockHolders, schema)) {
    if (!out.empty()) out += ", ";
    out += "pid " + row["pid"].as<std::string>() + " (application '" + row["application_name"].as<std::string>() +
           "', client " + row["client"].as<std::string>() + ", state '" + row["state"].as<std::string>() +
           "', connected since " + row["since"].as<std::string>() + ")";
  }
  return out.empty() ? "a session that released it meanwhile" : out;
}

[[noreturn]] void lost(const std::string& schema, const std::string& why) {
  throw MigrationError("MIGRATION_LOCK_LOST", "the migration lock of schema '" + schema + "' was lost (" + why +
                                                  "); nothing more was applied: run migrate again");
}

}  // namespace

MigrationLock::MigrationLock(pqxx::connection& connection, std::string schema, std::chrono::milliseconds wait)
    : connection_(connection), schema_(std::move(schema)) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + wait;
  // Short polls first (runners starting together finish quickly), at most 1 s apart.
  const BackoffOptions backoff{.base = std::chrono::milliseconds(20), .cap = std::chrono::seconds(1)};
  for (int attempt = 1;; ++attempt) {
    if (pqxx::nontransaction(connection_).exec_params1(core_sql::kMigrateTryLock, schema_)[0].as<bool>()) break;
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline)
      throw MigrationError("MIGRATION_LOCK_BUSY", "the migration lock of schema '" + schema_ + "' is held by " +
                                                      describe_holders(connection_, schema_) + "; gave up after " +
                                                      std::to_string(wait.count()) + " ms (migrate.lock_wait)");
    if (attempt == 1)
      log_event(*logger("migrate"), LogLevel::Info, "waiting for the migration lock",
                {{"schema", schema_}, {"holder", describe_holders(connection_, schema_)}});
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
    std::this_thread::sleep_for(std::min(backoff_ceiling(backoff, attempt), left + std::chrono::milliseconds(1)));
  }
  waited_ = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
  backend_pid_ = connection_.backendpid();
}

MigrationLock::~MigrationLock() {
  try {
    if (connection_.is_open()) pqxx::nontransaction(connection_).exec_params(core_sql::kMigrateUnlock, schema_);
  } catch (...) {
    // The lock dies with the session, which closes right after.
  }
}

void MigrationLock::verify_held() const {
  bool held = false;
  try {
    held = pqxx::nontransaction(connection_).exec_params1(core_sql::kMigrateLockHeld, schema_)[0].as<bool>();
  } catch (const pqxx::broken_connection& e) {
    lost(schema_, std::string("the session ended: ") + e.what());
  } catch (const pqxx::sql_error& e) {
    // 57P01 and friends: the backend was terminated under us. Anything else is a bug.
    const std::string state = sqlstate_of(e);
    if (!state.starts_with("57P") && !state.starts_with("08")) throw;
    lost(schema_, std::string("the session ended: ") + e.what());
  }
  if (!held || connection_.backendpid() != backend_pid_)
    lost(schema_, "the session no longer holds it; backend " + std::to_string(connection_.backendpid()) + " is not " +
                      std::to_string(backend_pid_));
}

}  // namespace boxcar::detail
