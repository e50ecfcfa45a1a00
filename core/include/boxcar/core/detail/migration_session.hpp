// The migration runner's own database session. Not public API; declared here so a test
// can check that it never reconnects behind the runner's back.
#pragma once

#include <pqxx/pqxx>

#include <chrono>
#include <memory>
#include <string>

namespace boxcar::detail {

/// A new connection named `boxcar migrate` in pg_stat_activity, with `lock_timeout` set
/// for the session and libpqxx's silent reactivation inhibited: once its backend is gone,
/// every use throws pqxx::broken_connection instead of opening a new session, which would
/// not hold the migration lock.
/// @throws DatabaseError when the database cannot be reached.
std::unique_ptr<pqxx::connection> open_migration_session(const std::string& connection_string,
                                                         std::chrono::milliseconds lock_timeout);

}  // namespace boxcar::detail
