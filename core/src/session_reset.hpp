// Resetting a pooled connection's session before the next borrower gets it (the pool's
// server_reset_query, in PgBouncer's terms).
#pragma once

#include <string>
#include <unordered_set>
#include <vector>

#include <pqxx/pqxx>

namespace boxcar::detail {

/// Undoes what application code may have left in `connection`'s session (settings, role,
/// temporary tables, session advisory locks, LISTENs, WITH HOLD cursors) and checks that
/// the server holds exactly the prepared statements in `prepared` (those prepare_once()
/// declared). A declared statement the server never registered is forgotten by libpqxx
/// (it registers it again on next use). Returns false when the connection must be closed
/// instead of reused: the reset failed, or the server holds a prepared statement libpqxx
/// does not know (raw PREPARE) or lost one libpqxx believes registered (raw DEALLOCATE).
/// Never throws.
bool reset_session(pqxx::connection& connection, std::unordered_set<std::string>& prepared) noexcept;

/// reset_session()'s check alone, for a session reset by its last COMMIT
/// (Tx::commit_and_reset_session): `on_server` are the names in pg_prepared_statements,
/// read after the last statement application code ran. Returns false when the
/// connection must be closed. Never throws.
bool check_prepared(pqxx::connection& connection, std::unordered_set<std::string>& prepared,
                    const std::vector<std::string>& on_server) noexcept;

}  // namespace boxcar::detail
