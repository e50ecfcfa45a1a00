// Resetting a pooled connection's session before the next borrower gets it (the pool's
// server_reset_query, in PgBouncer's terms).
#pragma once

#include <string>
#include <unordered_set>

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

}  // namespace boxcar::detail
