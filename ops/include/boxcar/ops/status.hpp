// `boxcar status`: exact counts of receipts and events by status (docs/operator.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/ops/database_health.hpp"
#include "boxcar/ops/ordering_keys.hpp"
#include "boxcar/ops/record_kind.hpp"

namespace boxcar {

/// Inbox receipts of one consumer by status. Counts are exact.
struct InboxConsumerStatus {
  std::string consumer{};
  /// Named in `declared_consumers` (a declared consumer without rows shows zeros; a
  /// consumer with rows that nobody declared still shows, with declared = false).
  bool declared = false;
  std::int64_t pending = 0;
  std::int64_t processing = 0;
  std::int64_t retryable = 0;
  std::int64_t completed = 0;
  /// Behind the head of their ordering key (docs/ordering.md).
  std::int64_t waiting = 0;
  /// DEAD and not discarded: what still needs an operator.
  std::int64_t dead = 0;
  /// DEAD and discarded (kept for deduplication, no longer counted as dead).
  std::int64_t discarded = 0;
  /// now() - the oldest available_at among due PENDING/RETRYABLE rows; 0 when none is due.
  std::chrono::milliseconds oldest_due_age{0};
};

/// Outbox events by status. Counts are exact.
struct OutboxStatus {
  std::int64_t pending = 0;
  /// Ordered events behind the unfinished head of their key (docs/publisher.md, "Ordering").
  std::int64_t waiting = 0;
  std::int64_t publishing = 0;
  std::int64_t retryable = 0;
  std::int64_t published = 0;
  std::int64_t dead = 0;
  std::int64_t discarded = 0;
  /// now() - the oldest created_at among PENDING/WAITING/PUBLISHING/RETRYABLE events (emitted
  /// but not yet published, DEAD excluded); 0 when there is none.
  std::chrono::milliseconds oldest_unpublished_age{0};
};

struct StatusReport {
  std::string schema{};
  /// One entry per consumer, sorted by name.
  std::vector<InboxConsumerStatus> inbox{};
  OutboxStatus outbox{};
  /// Ordering keys whose head has failed, longest blocked first (at most 100).
  std::vector<BlockedKey> blocked_keys{};
  /// The session holding back the xmin horizon the longest (another than status's own),
  /// if any: while it stays open, VACUUM cannot remove the rows finished after it began.
  std::optional<XminHolder> xmin_holder{};
};

/// Counts every receipt and event by status in one read-only REPEATABLE READ snapshot.
/// Exact counts scan both tables (including retained COMPLETED/PUBLISHED rows): meant for
/// an operator on demand, not for a scrape loop (the backlog metrics are cheaper).
/// @throws ConfigError for an invalid schema name; DatabaseError.
StatusReport status(ConnectionPool& pool, const std::string& schema,
                    const std::vector<std::string>& declared_consumers = {});

/// An aligned, human-readable table (one inbox row per consumer, one outbox row).
std::string to_table(const StatusReport& report);
/// The version of the document to_json(StatusReport) renders, which `boxcar status --json`
/// prints as "format_version". Raised when a field is removed, renamed or changes meaning;
/// adding a field keeps it (docs/operator.md, "JSON formats").
inline constexpr int kStatusFormatVersion = 1;

/// {"format_version", "schema", "blocked_keys": [...], "xmin_holder": {...} or null,
/// "inbox": {"consumers": [...], "totals": {...}}, "outbox": {...}}; ages in seconds (`oldest_due_age_seconds`,
/// `oldest_unpublished_age_seconds`). docs/operator.md lists every field.
nlohmann::json to_json(const StatusReport& report);

}  // namespace boxcar
