// The database's health as Boxcar's operators need it (docs/console.md, "Database
// health"): the session that holds back the xmin horizon (so VACUUM cannot remove dead
// rows), replication slots that pin WAL, dead tuples and the last (auto)vacuum of the
// schema's tables, the cluster's NOTIFY queue, lock waits on the schema's tables and the
// migration version. Each names the thing to fix, not only the symptom.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/ops/record_kind.hpp"

namespace boxcar {

/// A session of this database whose snapshot (or transaction id) is the oldest: while it
/// stays open, VACUUM keeps every row version deleted after it began, in every table of
/// the database.
/// The details of another role's session are empty unless the reading role has
/// pg_read_all_stats (PostgreSQL hides them); the pid and the age are always known.
struct XminHolder {
  int pid = 0;
  std::string application_name{};
  std::string user{};
  std::string database{};
  /// "active", "idle in transaction", ...; empty when hidden.
  std::string state{};
  std::string backend_type{};
  /// Transactions between its xmin and the current one (pg_catalog.age).
  std::int64_t xmin_age = 0;
  /// How long its transaction has been open (0 when hidden).
  std::chrono::milliseconds transaction_age{0};
  /// When its current (or last) statement started; absent when hidden.
  std::optional<Timestamp> query_start{};
};

/// The sessions holding back the xmin horizon, oldest first, at most `limit` (the
/// caller's own session excluded).
/// @throws DatabaseError.
std::vector<XminHolder> xmin_holders(ConnectionPool& pool, std::size_t limit = 5);

/// {"pid", "application_name", "user", "database", "state", "backend_type", "xmin_age",
/// "transaction_age_seconds", "query_start"} (query_start RFC 3339 or null).
nlohmann::json to_json(const XminHolder& holder);

/// Every panel of the console's health page as one JSON document (docs/console.md lists
/// the fields): "xmin_holders", "replication_slots", "tables", "notification_queue_usage",
/// "lock_waits", "migrations". Reads the catalog and statistics views only, in one
/// read-only transaction.
/// @throws ConfigError for an invalid schema name; DatabaseError.
nlohmann::json database_health_document(ConnectionPool& pool, const std::string& schema);

}  // namespace boxcar
