// Retention of finished rows, one implementation for `boxcar purge` and the janitor
// (janitor.hpp): COMPLETED inbox receipts past their retention are deleted in bounded
// batches; the outbox is partitioned by emit time (docs/schema.md, "Outbox partitions"), so
// its retention creates daily partitions ahead and retires whole old partitions whose every
// event is finished (DETACH PARTITION ... CONCURRENTLY, then DROP TABLE), never rows.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/ops/record_kind.hpp"

namespace boxcar {

struct PurgeOptions {
  /// COMPLETED receipts whose completed_at is older than this are deleted. While a
  /// receipt is retained a redelivery of its identity is a Duplicate; once purged, the
  /// same identity is accepted as new and handled again. Never shorter than
  /// redelivery_horizon (validate_retention).
  std::chrono::hours inbox_retention{24 * 30};
  /// An outbox partition is retired once every event in it was emitted, and PUBLISHED (or
  /// DEAD and discarded), more than this long ago.
  std::chrono::hours outbox_retention{24 * 7};
  /// The longest time after which any source may still redeliver a message it sent (a
  /// broker's retention, a webhook sender's retry window). 0: not told.
  std::chrono::hours redelivery_horizon{0};
  /// DEAD receipts (discarded or not) whose last change (updated_at: when they went DEAD,
  /// were discarded or their key released) is older than this are deleted; once deleted, a
  /// redelivery of the identity is accepted as new and handled again. A DEAD head that
  /// still blocks its ordering key is kept. 0 (the default): DEAD receipts are kept until an
  /// operator retries them. Never shorter than redelivery_horizon (validate_retention).
  std::chrono::hours dead_retention{0};
  /// Rows per inbox DELETE; each batch is its own short transaction.
  std::size_t batch_size = 1000;
  /// Whole UTC days after today that outbox partitions must cover when the run ends.
  int partitions_ahead = 7;
  /// Count what would be deleted or retired without changing anything.
  bool dry_run = false;
};

struct PurgeReport {
  bool dry_run = false;
  /// COMPLETED receipts deleted (dry run: receipts that are past retention now).
  std::int64_t inbox_deleted = 0;
  /// DEAD receipts deleted (dead_retention; dry run: those past it now).
  std::int64_t inbox_dead_deleted = 0;
  /// Inbox DELETE statements run, COMPLETED and DEAD (0 for a dry run).
  std::int64_t inbox_batches = 0;
  /// Events in the outbox partitions dropped (dry run: in those that would be).
  std::int64_t outbox_deleted = 0;
  /// Outbox partitions created ahead, retired (detached and dropped; dry run: retirable),
  /// and kept although past retention because an event in them is unfinished.
  std::int64_t outbox_partitions_created = 0;
  std::int64_t outbox_partitions_retired = 0;
  std::int64_t outbox_partitions_blocked = 0;
  /// Tables an interrupted run had detached with an unfinished event, attached again (dry
  /// run: that would be). Those it had detached with every event retirable count as
  /// retired.
  std::int64_t outbox_partitions_reattached = 0;
  /// Why the outbox steps did not run (the session may not act as the tables' owner);
  /// empty when they ran.
  std::string outbox_skipped{};
};

/// Refuses an inbox retention, or a DEAD retention other than 0 (off), shorter than the
/// redelivery horizon: a redelivery after its receipt is purged would be accepted as new
/// and handled again. `inbox_field`, `horizon_field` and `dead_field` are the names the
/// caller's input used (configuration keys, flags).
/// @throws ConfigError(inbox_field) or ConfigError(dead_field) naming both fields and
///   values; also for a negative value of any of them.
void validate_retention(const PurgeOptions& options, const std::string& inbox_field = "inbox_retention",
                        const std::string& horizon_field = "redelivery_horizon",
                        const std::string& dead_field = "dead_retention");

/// One retention run on `session`, a connection of the caller's with no transaction open
/// (DETACH ... CONCURRENTLY cannot run in one), acting as the owner of the schema's tables
/// (a member of that role is enough: the run switches to it with SET ROLE and back; any
/// other role skips steps 1-4 and says so in outbox_skipped):
///   1. a table an earlier run detached (it marks each partition before a DETACH) and
///      neither attached again nor dropped, because it ended in between, is attached again
///      when it holds an unfinished event, else dropped;
///   2. outbox partitions created ahead (partitions_ahead);
///   3. a DETACH ... CONCURRENTLY that an earlier run left unfinished is FINALIZEd;
///   4. each partition whose ids are all older than outbox_retention and whose events are
///      all finished (PUBLISHED, or DEAD and discarded, before the same cutoff) is
///      detached CONCURRENTLY (emitters and publishers go on), checked again and dropped;
///      a partition with an unfinished event is kept and counted as blocked;
///   5. COMPLETED receipts past inbox_retention deleted in batches of batch_size, each its
///      own autocommit statement, until a batch deletes fewer;
///   6. when dead_retention is not 0, DEAD receipts past it deleted the same way, consumer
///      by consumer (a DEAD head that blocks its ordering key is kept).
/// Rows in any other status are never touched. Logged on "retention".
/// @throws ConfigError (validate_retention); OperatorError PURGE_INVALID; DatabaseError
///   (steps done before the failure stay done; the next run takes up the rest).
PurgeReport run_retention(pqxx::connection& session, const std::string& schema, const PurgeOptions& options);

/// run_retention on a session of its own, opened from pool.session_connection_string()
/// (database.session_url when set, as `boxcar purge` does) and closed after the run, never
/// a pooled connection: the run's SET ROLE and DETACH ... CONCURRENTLY need one session,
/// which a transaction pooler in front of database.url does not give (docs/operations.md,
/// "PgBouncer").
/// @throws as run_retention; DatabaseError when the session cannot be opened.
PurgeReport purge(ConnectionPool& pool, const std::string& schema, const PurgeOptions& options = {});

nlohmann::json to_json(const PurgeReport& report);
std::string to_table(const PurgeReport& report);

}  // namespace boxcar
