// The migration runner's session: named, lock_timeout set, never silently re-opened.
#include "boxcar/core/detail/migration_session.hpp"

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "core_queries.hpp"

namespace boxcar::detail {

// libpqxx 6.4 re-opens a broken connection on its next use unless told not to
// (connection_base: "the connection will be restored automatically"); the new backend
// would hold no advisory lock and the run would go on unlocked beside another runner.
// The runner also checks, before each step, that its backend still holds the lock
// (MigrationLock::verify_held), in case a future libpqxx changes this.
std::unique_ptr<pqxx::connection> open_migration_session(const std::string& connection_string,
                                                         std::chrono::milliseconds lock_timeout) {
  std::unique_ptr<pqxx::connection> connection;
  try {
    connection = detail::open_connection(connection_string);  // eager: connected here
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    connection->inhibit_reactivation(true);  // deprecated in 6.4, and still its only switch
#pragma GCC diagnostic pop
    pqxx::nontransaction tx(*connection);
    tx.exec_params(core_sql::kSetApplicationName, "boxcar migrate");
    tx.exec_params(core_sql::kSetLockTimeout, std::to_string(lock_timeout.count()) + "ms");
  } catch (...) {
    throw to_database_error(std::current_exception(), "connecting to migrate", false);
  }
  return connection;
}

}  // namespace boxcar::detail
