// `boxcar dead list|groups|show|retry|discard`: DEAD records, grouped by failure
// fingerprint, and the operator actions on them (docs/operator.md).
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
ActionResult dead_retry(ConnectionPool& pool, const std::string& schema, RecordKind kind, const DeadFilter& filter,
                        const std::string& actor, bool dry_run = false);

/// Discards the matching DEAD records: discarded_at/by recorded, the row stays DEAD with
/// its identity, so an inbox redelivery of it is still a Duplicate (never re-run) and
/// status/dead_list stop counting it. Same selection, bounds, logging and errors as
/// dead_retry.
ActionResult dead_discard(ConnectionPool& pool, const std::string& schema, RecordKind kind, const DeadFilter& filter,
                          const std::string& actor, bool dry_run = false);

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

/// The version of the documents dead_list_document() renders, which `boxcar dead list
/// --json` prints as "format_version". Raised when a field is removed, renamed or changes
/// meaning; adding a field keeps it (docs/operator.md, "JSON formats").
inline constexpr int kDeadListFormatVersion = 1;
/// `boxcar dead list --json`: {"format_version", "kind", "records": [to_json(record)...]}.
nlohmann::json dead_list_document(RecordKind kind, const std::vector<DeadRecord>& records);
/// `boxcar dead list --group --json`: {"format_version", "kind", "groups": [...]}.
nlohmann::json dead_list_document(RecordKind kind, const std::vector<DeadGroup>& groups);

}  // namespace boxcar
