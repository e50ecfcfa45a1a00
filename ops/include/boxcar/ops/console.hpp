// The operator console's reads and its action record (docs/console.md): the documents of
// the console's JSON API under /api/v1/, which the runtime host serves (runtime/src/
// console_server.cpp) and the page renders. Each read costs a bounded number of rows
// whatever the backlog (docs/console.md, "Cost and plans") and needs only the console role
// (core/include/boxcar/core/roles.hpp): no statement here reads a payload, metadata or
// header. The one write, record_operator_action(), runs as the operator role.
//
// Every function borrows one connection from `pool` for the call; none takes or leaves a
// caller's transaction. Thread-safety: safe from any thread; results are plain values.
// Errors: OperatorError for invalid requests, ConfigError for a malformed schema name,
// DatabaseError when PostgreSQL fails.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/ops/record_kind.hpp"

namespace boxcar {

/// The bounds of the console's reads.
struct ConsoleLimits {
  /// The window of the completion and delivery rates.
  std::chrono::seconds rate_window{60};
  /// Most index entries a rate reads; a rate that reaches it is a floor ("capped").
  std::int64_t rate_cap = 100000;
  /// The consumers with the largest due backlog whose tenants the overview lists.
  std::size_t tenant_consumers = 10;
  /// The oldest due receipts read per such consumer to rank its tenants.
  std::int64_t tenant_sample = 1000;
  /// Tenants listed at most.
  std::size_t top_tenants = 20;
  /// Failure groups, blocked keys, recent errors and recorded actions listed at most.
  std::size_t groups = 100;
  std::size_t blocked_keys = 100;
  std::size_t recent_errors = 5;
  std::size_t actions = 50;
  /// Largest page of a group's receipts.
  std::size_t max_page = 500;
};

/// The overview: per consumer (declared ones first, then any other the backlog figures
/// hold) PENDING, RETRYABLE, PROCESSING, WAITING and DEAD, the oldest due age and the
/// completion rate; the outbox's unpublished counts, oldest unpublished age, delivery rate
/// and most recent failures; the tenants behind the oldest due receipts. The counts are
/// the fleet's backlog figures (backlog_snapshot, recomputed every
/// metrics.backlog_interval_ms by one process), with the `status --json` field names.
nlohmann::json console_overview(ConnectionPool& pool, const std::string& schema,
                                const std::vector<std::string>& declared_consumers, const ConsoleLimits& limits = {});

/// The DEAD failure groups of `kind`, as `boxcar dead list --group` computes them, largest
/// first: {"kind", "groups": [{"group", "failure", "count", "first_seen", "last_seen",
/// "consumers", "event_types", "topics"}]}.
nlohmann::json console_dead_groups(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                   const ConsoleLimits& limits = {});

/// Where a page of a group's receipts starts: after this row (from the previous page's
/// "next"); absent for the first page.
struct GroupCursor {
  std::string consumer{};  // inbox only
  std::int64_t updated_at_us = 0;
  std::int64_t id = 0;
};

/// One keyset page of a DEAD group's records (`limit` at most, ≤ limits.max_page):
/// {"kind", "group", "records": [...], "next": cursor or null}.
/// @throws OperatorError DEAD_FILTER_INVALID for a limit of 0 or above limits.max_page,
///   or a group key that is not 12 hex digits.
nlohmann::json console_group_page(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                  const std::string& group, const std::optional<GroupCursor>& after, std::size_t limit,
                                  const ConsoleLimits& limits = {});

/// One DEAD record without its content: identity, attempts, errors and the audit record
/// (replayed, discarded, and for a receipt its ordering key and key release: when and by
/// whom).
/// @throws OperatorError DEAD_RECORD_NOT_FOUND.
nlohmann::json console_record(ConnectionPool& pool, const std::string& schema, RecordKind kind, std::int64_t id);

/// Blocked ordering keys, longest blocked first: consumer, scope, key, head receipt, its
/// status, attempts and error, blocked since and for how long.
nlohmann::json console_blocked_keys(ConnectionPool& pool, const std::string& schema, const ConsoleLimits& limits = {});

/// The most recent recorded operator actions, newest first.
nlohmann::json console_actions(ConnectionPool& pool, const std::string& schema, const ConsoleLimits& limits = {});

/// Records one action taken through the console in operator_actions (the operator role).
/// `action`: retry, discard or unblock; `target`: what it named (a group key, an id, a
/// scoped key); `rows`: how many rows it changed.
void record_operator_action(ConnectionPool& pool, const std::string& schema, const std::string& actor,
                            const std::string& action, RecordKind kind, const std::string& target, std::int64_t rows);

/// A stored payload or metadata document as an admin sees it: redacted by the rules of
/// the logs (docs/security.md, section 6): the value of every member whose name says it
/// holds a secret (password, secret, token, authorization, api_key, credential, ...) is
/// "***", and every string passes through redact_secrets().
nlohmann::json redact_content(const nlohmann::json& content);

}  // namespace boxcar
