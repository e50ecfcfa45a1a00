// `boxcar purge`, the janitor: deletes retained COMPLETED receipts and PUBLISHED events
// past their retention, in bounded batches beside live workers (docs/operator.md).
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
#include "boxcar/ops/record_kind.hpp"

namespace boxcar {

struct PurgeOptions {
  /// COMPLETED receipts whose completed_at is older than this are deleted. While a
  /// receipt is retained a redelivery of its identity is a Duplicate; once purged, the
  /// same identity is accepted as new and handled again. Keep it longer than the longest
  /// redelivery window of every source.
  std::chrono::hours inbox_retention{24 * 30};
  /// PUBLISHED events whose published_at is older than this are deleted.
  std::chrono::hours outbox_retention{24 * 7};
  /// Rows per DELETE; each batch is its own short transaction.
  std::size_t batch_size = 1000;
  /// Count what would be deleted without deleting.
  bool dry_run = false;
};

struct PurgeReport {
  bool dry_run = false;
  /// Rows deleted (dry run: rows that are past retention now).
  std::int64_t inbox_deleted = 0;
  std::int64_t outbox_deleted = 0;
  /// DELETE statements run (0 for a dry run).
  std::int64_t inbox_batches = 0;
  std::int64_t outbox_batches = 0;
};

/// Deletes retained COMPLETED receipts and PUBLISHED events past their retention, oldest
/// first, in batches of batch_size, each its own autocommit DELETE, until a batch deletes
/// fewer than batch_size. Rows in any other status (PENDING, PROCESSING, RETRYABLE,
/// PUBLISHING, DEAD, discarded) are never touched. Rows locked by another session are
/// skipped (the next run takes them). Safe beside live workers. Logged on "operator".
/// @throws OperatorError PURGE_INVALID; ConfigError; DatabaseError (batches before the
///   failing one stay deleted).
PurgeReport purge(ConnectionPool& pool, const std::string& schema, const PurgeOptions& options = {});

nlohmann::json to_json(const PurgeReport& report);
std::string to_table(const PurgeReport& report);

}  // namespace boxcar
