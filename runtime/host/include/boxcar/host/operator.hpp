// Operator commands on a Boxcar schema: the library side of `boxcar status`,
// `boxcar dead list|groups|show|retry|discard` and `boxcar purge` (docs/operator.md).
//
//   auto report = boxcar::status(*pool, "boxcar", {"orders.projection.v1"});
//   std::cout << boxcar::to_table(report);
//
//   boxcar::DeadFilter filter{.consumer = "orders.projection.v1", .group = "3f2a9c01b7de"};
//   auto planned = boxcar::dead_retry(*pool, "boxcar", boxcar::RecordKind::Inbox, filter,
//                                     "alice", /*dry_run=*/true);
//
// Every function borrows one connection from `pool` for the duration of the call and runs
// its own short transactions (autocommit statements); none takes or leaves a caller's
// transaction. Writes (retry, discard, purge) are single bounded statements, so they can
// run beside live workers and publishers: rows another session holds locked are skipped,
// never waited for.
//
// Thread-safety: every function is safe to call from any thread; results are plain values.
// Errors: OperatorError for invalid requests (before anything is written), ConfigError for
// a malformed schema name, DatabaseError (DATABASE_*) when PostgreSQL fails.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/runtime/connection_pool.hpp"
#include "boxcar/runtime/error.hpp"

namespace boxcar {

/// An operator request that cannot be carried out as asked. Nothing was written.
/// Codes:
///   DEAD_FILTER_REQUIRED   retry/discard without any criterion and without `all = true`
///   DEAD_FILTER_INVALID    limit 0, a negative age, or a consumer filter on outbox events
///   DEAD_ACTOR_REQUIRED    retry/discard without an actor (who did it is recorded)
///   DEAD_RECORD_NOT_FOUND  dead_show() for an id that does not exist or is not DEAD
///   PURGE_INVALID          a negative retention or a zero batch size
///   RECORD_KIND_INVALID    parse_record_kind() of anything but "inbox" / "outbox"
class OperatorError final : public Error {
 public:
  using Error::Error;
};

/// Which table a dead-record command works on: inbox_receipts or outbox_events.
enum class RecordKind { Inbox, Outbox };

/// "inbox" or "outbox".
const char* to_string(RecordKind kind) noexcept;
/// Inverse of to_string. @throws OperatorError RECORD_KIND_INVALID.
RecordKind parse_record_kind(std::string_view text);

using Timestamp = std::chrono::system_clock::time_point;

// ---------------------------------------------------------------------------------------
// status

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
  std::int64_t publishing = 0;
  std::int64_t retryable = 0;
  std::int64_t published = 0;
  std::int64_t dead = 0;
  std::int64_t discarded = 0;
  /// now() - the oldest created_at among PENDING/PUBLISHING/RETRYABLE events (emitted
  /// but not yet published, DEAD excluded); 0 when there is none.
  std::chrono::milliseconds oldest_unpublished_age{0};
};

struct StatusReport {
  std::string schema{};
  /// One entry per consumer, sorted by name.
  std::vector<InboxConsumerStatus> inbox{};
  OutboxStatus outbox{};
};

/// Counts every receipt and event by status in one read-only REPEATABLE READ snapshot.
/// Exact counts scan both tables (including retained COMPLETED/PUBLISHED rows): meant for
/// an operator on demand, not for a scrape loop (the backlog metrics are cheaper).
/// @throws ConfigError for an invalid schema name; DatabaseError.
StatusReport status(ConnectionPool& pool, const std::string& schema,
                    const std::vector<std::string>& declared_consumers = {});

/// An aligned, human-readable table (one inbox row per consumer, one outbox row).
std::string to_table(const StatusReport& report);
/// {"schema", "inbox": {"consumers": [...], "totals": {...}}, "outbox": {...}}; ages in
/// seconds (`oldest_due_age_seconds`, `oldest_unpublished_age_seconds`).
nlohmann::json to_json(const StatusReport& report);

// ---------------------------------------------------------------------------------------
// dead records

/// Which DEAD records a command applies to. Only DEAD rows that are not discarded ever
/// match; every criterion that is set must hold (AND).
struct DeadFilter {
  /// Row ids (inbox_receipts.id / outbox_events.id). Empty: any id.
  std::vector<std::int64_t> ids{};
  /// Inbox only (an outbox filter with a consumer is DEAD_FILTER_INVALID).
  std::string consumer{};
  std::string event_type{};
  /// Case-insensitive substring of last_error or last_error_type.
  std::string error_contains{};
  /// Only records whose updated_at (when they died) is older than this.
  std::optional<std::chrono::seconds> older_than{};
  /// A failure group key as dead_groups() reports it (12 hex digits).
  std::string group{};
  /// Most records a call lists or changes (most groups for dead_groups). Retry/discard
  /// change at most this many per call: call again while `limit_reached`.
  std::size_t limit = 100;
  /// Lets retry/discard run without any criterion: every DEAD record (up to `limit`).
  bool all = false;
};

/// One DEAD record. Identity fields depend on the kind; the others are empty.
struct DeadRecord {
  RecordKind kind = RecordKind::Inbox;
  std::int64_t id = 0;
  /// Inbox: scope_kind / scope_id. Outbox: tenant_scope / tenant_id. ("tenant"|"global")
  std::string scope_kind{};
  std::string scope_id{};
  /// Inbox identity (with the scope).
  std::string source{};
  std::string consumer{};
  std::string message_id{};
  /// Outbox identity and routing.
  std::string event_id{};
  std::string topic{};
  std::string message_key{};

  std::string event_type{};
  int schema_version = 0;
  int attempts = 0;
  std::string dead_reason{};
  /// Inbox only (outbox events record no error type).
  std::string last_error_type{};
  std::string last_error{};
  Timestamp created_at{};
  /// When the row last changed: for a DEAD row, when it died (or was discarded).
  Timestamp updated_at{};
  int replay_count = 0;
  std::optional<Timestamp> last_replayed_at{};
  std::string last_replayed_by{};
  /// Only dead_show() returns discarded records.
  std::optional<Timestamp> discarded_at{};
  std::string discarded_by{};

  /// The failure with numbers, UUIDs and hex ids masked: inbox
  /// "<last_error_type>: <masked last_error>", outbox "<dead_reason>: <masked last_error>".
  std::string failure{};
  /// First 12 hex digits of md5(failure): stable, usable as DeadFilter::group.
  std::string group{};

  // Filled by dead_show() only.
  /// Inbox: the SHA-256 content fingerprint of the receipt. Empty for outbox.
  std::string content_fingerprint{};
  /// The stored payload (null in dead_list results).
  nlohmann::json payload{};
  /// Inbox: the stored metadata. Outbox: {"headers", "causation_id", "correlation_id",
  /// "traceparent"}. Null in dead_list results.
  nlohmann::json metadata{};
};

/// DEAD records that share a failure fingerprint.
struct DeadGroup {
  std::string group{};
  std::string failure{};
  std::int64_t count = 0;
  /// Oldest and newest updated_at in the group.
  Timestamp first_seen{};
  Timestamp last_seen{};
  /// Distinct values in the group, sorted (consumers: inbox only; topics: outbox only).
  std::vector<std::string> consumers{};
  std::vector<std::string> event_types{};
  std::vector<std::string> topics{};
  std::vector<std::string> dead_reasons{};
};

/// What dead_retry / dead_discard did (or, for a dry run, would do).
struct ActionResult {
  std::string action{};  // "retry" | "discard"
  RecordKind kind = RecordKind::Inbox;
  bool dry_run = false;
  /// Ids changed (dry run: ids that match now), ascending.
  std::vector<std::int64_t> ids{};
  /// ids.size() reached filter.limit: more records may match; call again.
  bool limit_reached = false;
};

/// The matching DEAD records, oldest updated_at first, at most filter.limit.
/// @throws OperatorError DEAD_FILTER_INVALID; ConfigError; DatabaseError.
std::vector<DeadRecord> dead_list(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                  const DeadFilter& filter = {});

/// The matching DEAD records grouped by failure fingerprint, largest group first, at most
/// filter.limit groups.
/// @throws OperatorError DEAD_FILTER_INVALID; ConfigError; DatabaseError.
std::vector<DeadGroup> dead_groups(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                   const DeadFilter& filter = {});

/// One DEAD record (discarded or not) with its payload and metadata.
/// @throws OperatorError DEAD_RECORD_NOT_FOUND when `id` does not exist or is not DEAD;
///   ConfigError; DatabaseError.
DeadRecord dead_show(ConnectionPool& pool, const std::string& schema, RecordKind kind, std::int64_t id);

/// Replays the matching DEAD records: status PENDING, attempts 0 (inbox: finished_attempts
/// 0 too), due now, dead_reason cleared; last_error(_type) kept for history; replay_count
/// + 1, last_replayed_at/by recorded. Identity, content and fingerprint are untouched, so
/// the handler (or publisher) sees the same message again. One autocommit statement of at
/// most filter.limit rows; rows locked by another session are skipped. Wakes idle workers
/// or publishers with a NOTIFY (best effort; they poll anyway). Logged on the "operator"
/// logger. A dry run changes nothing and returns the ids that match now.
/// @throws OperatorError DEAD_FILTER_REQUIRED (no criterion and not `all`),
///   DEAD_FILTER_INVALID, DEAD_ACTOR_REQUIRED; ConfigError; DatabaseError (uncertain()
///   when the connection was lost while the update may have committed).
ActionResult dead_retry(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                        const DeadFilter& filter, const std::string& actor, bool dry_run = false);

/// Discards the matching DEAD records: discarded_at/by recorded, the row stays DEAD with
/// its identity, so an inbox redelivery of it is still a Duplicate (never re-run) and
/// status/dead_list stop counting it. Same selection, bounds, logging and errors as
/// dead_retry.
ActionResult dead_discard(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                          const DeadFilter& filter, const std::string& actor, bool dry_run = false);

/// Aligned tables for dead_list and dead_groups, and a "key: value" block for dead_show
/// (payload and metadata pretty-printed when present).
std::string to_table(const std::vector<DeadRecord>& records);
std::string to_table(const std::vector<DeadGroup>& groups);
std::string to_table(const DeadRecord& record);
/// Timestamps as RFC 3339 UTC strings with milliseconds; absent optionals as null.
nlohmann::json to_json(const DeadRecord& record);
nlohmann::json to_json(const std::vector<DeadRecord>& records);
nlohmann::json to_json(const std::vector<DeadGroup>& groups);
nlohmann::json to_json(const ActionResult& result);

// ---------------------------------------------------------------------------------------
// purge

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
