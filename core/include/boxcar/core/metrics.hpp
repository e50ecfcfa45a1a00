// boxcar::Metrics — every Prometheus metric Boxcar exports, behind named methods so
// components never see prometheus-cpp and label values stay bounded (consumer, event
// type, topic, status, outcome — never message ids or tenants).
//
// Components take a std::shared_ptr<Metrics> in their options; null means no metrics.
// Thread-safety: all members are thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace boxcar {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // Inbox.
  /// boxcar_inbox_accept_total{consumer,result}: accepted|duplicate|conflict|invalid|storage_error.
  void accept_result(const std::string& consumer, std::string_view result);
  /// boxcar_inbox_processed_total{consumer,event_type,outcome}:
  /// completed|retried|dead|stale|unsupported. Callers pass an event_type a handler of the
  /// consumer supports, or "(unsupported)": never one a sender chose (docs/security.md).
  void processed(const std::string& consumer, const std::string& event_type, std::string_view outcome);
  /// boxcar_inbox_handler_duration_seconds{consumer} (histogram).
  void handler_duration(const std::string& consumer, double seconds);
  /// boxcar_inbox_accept_to_complete_seconds{consumer} (histogram): receipt created → completed.
  void accept_to_complete(const std::string& consumer, double seconds);
  /// boxcar_inbox_claimed_total{consumer} and boxcar_inbox_claim_batch_size (histogram).
  void claimed(const std::string& consumer, std::size_t batch);
  /// boxcar_worker_claims_total{consumer}: claim statements the worker ran, empty ones
  /// included (what wake-ups cost the database; docs/worker.md, "Wake-ups").
  void claim_statement(const std::string& consumer);
  /// boxcar_worker_abandoned_handlers_total: handler threads given up on (a handler past
  /// its deadline, or past the shutdown grace) and replaced.
  void abandoned_handler();
  /// boxcar_worker_infrastructure_retries_total{consumer,reason}: claims given back without
  /// spending an attempt because the database failed before their handler ran; reason is
  /// pool_timeout|connection_lost|insufficient_resources|database_error|other.
  void infrastructure_retry(const std::string& consumer, std::string_view reason);
  /// boxcar_worker_crash_strikes_total{consumer}: leases that expired while their receipt
  /// ran alone in the suspect lane (the worker process died or hung on it).
  void crash_strike(const std::string& consumer);

  // Outbox and publisher.
  /// boxcar_outbox_emitted_total{event_type,topic}.
  void emitted(const std::string& event_type, const std::string& topic);
  /// boxcar_publisher_events_total{topic,outcome}: delivered|failed|dead.
  void published(const std::string& topic, std::string_view outcome, std::size_t count = 1);
  /// boxcar_publisher_emit_to_delivered_seconds{topic} (histogram): event row created → marked published.
  void emit_to_delivered(const std::string& topic, double seconds);
  /// boxcar_publisher_in_flight_events (gauge): events with the producer right now.
  void set_in_flight_events(std::size_t events);

  // Backlog, set by the background collector (never computed per scrape).
  /// boxcar_inbox_receipts{consumer,status} (gauge): exact up to the collector's cap, an
  /// estimate above it (see set_inbox_receipts_estimated).
  void set_inbox_receipts(const std::string& consumer, std::string_view status, double count);
  /// boxcar_inbox_receipts_estimated{consumer,status} (gauge): 1 when the matching
  /// boxcar_inbox_receipts value is an estimate (above the exact cap), 0 when exact.
  void set_inbox_receipts_estimated(const std::string& consumer, std::string_view status, bool estimated);
  /// boxcar_inbox_oldest_due_age_seconds{consumer} (gauge): how long the oldest due
  /// PENDING/RETRYABLE receipt has been due; 0 when none.
  void set_inbox_oldest_due_age(const std::string& consumer, double seconds);
  /// boxcar_inbox_blocked_keys{consumer} (gauge): ordering keys whose head receipt has
  /// failed (RETRYABLE, or DEAD under the block policy), and
  /// boxcar_inbox_oldest_blocked_age_seconds{consumer}: how long the longest-blocked one
  /// has been (docs/ordering.md).
  void set_inbox_blocked_keys(const std::string& consumer, double keys, double oldest_age_seconds);
  /// boxcar_inbox_blocked_keys_by_scope{consumer,scope} (gauge): the blocked keys of each
  /// scope (`global`, `tenant:ID`) in `by_scope`, which names a bounded set of scopes (the
  /// collector keeps the 20 with the most and sums the rest under `(other)`). The
  /// consumer's series of scopes not in `by_scope` are removed: a scope whose keys were
  /// released leaves no series behind.
  void set_inbox_blocked_keys_by_scope(const std::string& consumer, const std::map<std::string, double>& by_scope);
  /// boxcar_outbox_events{status} (gauge).
  void set_outbox_events(std::string_view status, double count);
  /// boxcar_outbox_oldest_unpublished_age_seconds (gauge); 0 when none.
  void set_outbox_oldest_unpublished_age(double seconds);
  /// boxcar_table_dead_tuples{table} and boxcar_table_size_bytes{table} (gauges).
  void set_table_health(const std::string& table, double dead_tuples, double size_bytes);
  /// boxcar_database_notify_queue_usage_ratio (gauge): pg_notification_queue_usage(), the
  /// fraction (0 to 1) of the cluster's NOTIFY queue in use; at 1 every NOTIFY fails.
  void set_notify_queue_usage(double ratio);
  /// boxcar_database_xmin_horizon_age_transactions (gauge): how many transactions behind
  /// the current one the oldest xmin holding back VACUUM on this database is; 0 when none.
  void set_xmin_horizon_age(double transactions);
  /// boxcar_backlog_collection_seconds (gauge) and boxcar_backlog_collection_errors_total.
  void backlog_collected(double seconds, bool ok);
  /// boxcar_backlog_snapshot_age_seconds{section} (gauge): age of the fleet's figures this
  /// process exported for `section` (inbox|outbox) at its last collection; and, when this
  /// process computed them itself, boxcar_backlog_snapshot_computed_total{section}.
  void backlog_snapshot(std::string_view section, double age_seconds, bool computed_here);

  // Retention, set by the janitor (ops/janitor.hpp; docs/operations.md, "Janitor").
  /// boxcar_janitor_leader (gauge): 1 while this process holds the schema's janitor lock.
  void set_janitor_leader(bool leader);
  /// After one janitor run: boxcar_janitor_runs_total{outcome} (ok|error),
  /// boxcar_janitor_partitions_created_total, boxcar_janitor_partitions_retired_total,
  /// boxcar_janitor_rows_purged_total{table} (inbox_receipts: COMPLETED receipts deleted;
  /// outbox_events: events in the partitions dropped) and boxcar_janitor_blocked_partitions
  /// (gauge: outbox partitions past retention kept for an unfinished event).
  void janitor_run(bool ok, std::int64_t partitions_created, std::int64_t partitions_retired, std::int64_t inbox_rows,
                   std::int64_t outbox_rows, std::int64_t blocked_partitions);

  /// Every metric in the Prometheus text exposition format (what /metrics serves).
  std::string serialize() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxcar
