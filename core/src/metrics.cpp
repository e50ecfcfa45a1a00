// boxcar::Metrics on prometheus-cpp: one private Registry per Metrics object, one family
// per exported name, label values supplied by the named methods only. prometheus-cpp stays
// out of the public header (pimpl), so components and applications never see it.
//
// Thread-safety: prometheus-cpp's Family::Add (find-or-create under the family's mutex)
// and the metric updates (atomics / per-histogram mutex) are thread-safe, so no lock of
// our own is needed. Add() with a label set that exists returns the existing series and
// ignores the bucket argument.
#include "boxcar/core/metrics.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <sstream>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

namespace boxcar {

namespace {

using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;

// A handler runs from a millisecond (a single insert) up to its timeout (30 s default cap).
const Histogram::BucketBoundaries kHandlerBuckets = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                     0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};
// End-to-end latencies include polling, retries with backoff and publisher batching: from
// a few milliseconds (NOTIFY wake-up) to minutes (a retry or a broker outage).
const Histogram::BucketBoundaries kLatencyBuckets = {0.005, 0.01, 0.025, 0.05, 0.1,  0.25,  0.5,  1.0,
                                                     2.5,   5.0,  10.0,  30.0, 60.0, 120.0, 300.0};
// Claim batches are 1..batch_size rows (batch sizes above 1000 are not sensible).
const Histogram::BucketBoundaries kBatchBuckets = {1, 2, 5, 10, 20, 50, 100, 200, 500, 1000};

/// Durations come from two clocks (database and host) and may be slightly negative.
double non_negative(double seconds) { return std::isfinite(seconds) ? std::max(0.0, seconds) : 0.0; }

Family<Counter>& counter(prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return prometheus::BuildCounter().Name(name).Help(help).Register(registry);
}
Family<Gauge>& gauge(prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return prometheus::BuildGauge().Name(name).Help(help).Register(registry);
}
Family<Histogram>& histogram(prometheus::Registry& registry, const std::string& name, const std::string& help) {
  return prometheus::BuildHistogram().Name(name).Help(help).Register(registry);
}

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();

  // Inbox.
  Family<Counter>& accept_total = counter(*registry, "boxcar_inbox_accept_total",
                                          "Inbox accept() calls by consumer and result "
                                          "(accepted, duplicate, conflict, invalid, storage_error).");
  Family<Counter>& processed_total = counter(*registry, "boxcar_inbox_processed_total",
                                             "Receipts the worker finished an attempt on, by consumer, event type "
                                             "and outcome (completed, retried, dead, stale, unsupported).");
  Family<Histogram>& handler_seconds = histogram(*registry, "boxcar_inbox_handler_duration_seconds",
                                                 "Handler run time per attempt, including its transaction's commit.");
  Family<Histogram>& accept_to_complete_seconds =
      histogram(*registry, "boxcar_inbox_accept_to_complete_seconds",
                "Time from receipt creation (accept) to its COMPLETED commit.");
  Family<Counter>& claimed_total =
      counter(*registry, "boxcar_inbox_claimed_total", "Receipts claimed by the worker, by consumer.");
  Family<Histogram>& claim_batch_size =
      histogram(*registry, "boxcar_inbox_claim_batch_size", "Receipts per non-empty claim.");
  Family<Counter>& claims_total =
      counter(*registry, "boxcar_worker_claims_total",
              "Claim statements the worker ran, by consumer, including those that found nothing.");
  Counter& abandoned_handlers = counter(*registry, "boxcar_worker_abandoned_handlers_total",
                                        "Handler threads the worker abandoned (their handler ignored its "
                                        "deadline or the shutdown grace) and replaced.")
                                    .Add({});
  Family<Counter>& infrastructure_retries =
      counter(*registry, "boxcar_worker_infrastructure_retries_total",
              "Claims given back without spending an attempt because the database failed before their "
              "handler ran, by consumer and reason (pool_timeout, connection_lost, database_error, other).");
  Family<Counter>& crash_strikes = counter(*registry, "boxcar_worker_crash_strikes_total",
                                           "Leases that expired while their receipt ran alone in the suspect "
                                           "lane (its worker process died or hung on it), by consumer.");

  // Outbox and publisher.
  Family<Counter>& emitted_total = counter(*registry, "boxcar_outbox_emitted_total",
                                           "Events written to the outbox, counted when the emitting "
                                           "transaction commits, by event type and topic.");
  Family<Counter>& published_total = counter(*registry, "boxcar_publisher_events_total",
                                             "Publisher outcomes by topic: delivered, failed (will retry), dead.");
  Family<Histogram>& emit_to_delivered_seconds =
      histogram(*registry, "boxcar_publisher_emit_to_delivered_seconds",
                "Time from outbox row creation (emit) to its PUBLISHED mark.");
  Gauge& in_flight_events = gauge(*registry, "boxcar_publisher_in_flight_events",
                                  "Events handed to the Kafka producer and not yet acknowledged.")
                                .Add({});

  // Backlog (set by the background collector).
  Family<Gauge>& inbox_receipts = gauge(*registry, "boxcar_inbox_receipts",
                                        "Inbox receipts by consumer and status (PENDING, RETRYABLE, "
                                        "PROCESSING, WAITING, DEAD not discarded) at the last backlog collection.");
  Family<Gauge>& inbox_receipts_estimated =
      gauge(*registry, "boxcar_inbox_receipts_estimated",
            "1 when boxcar_inbox_receipts of the same consumer and status is an estimate (above the collector's "
            "exact cap), 0 when it is an exact count.");
  Family<Gauge>& inbox_oldest_due_age =
      gauge(*registry, "boxcar_inbox_oldest_due_age_seconds",
            "How long the oldest due PENDING/RETRYABLE receipt of a consumer has been due; 0 when none.");
  Family<Gauge>& inbox_blocked_keys =
      gauge(*registry, "boxcar_inbox_blocked_keys",
            "Ordering keys of a consumer whose head receipt has failed (RETRYABLE, or DEAD under the block policy).");
  Family<Gauge>& inbox_blocked_keys_by_scope =
      gauge(*registry, "boxcar_inbox_blocked_keys_by_scope",
            "Blocked ordering keys of a consumer per scope (global, tenant:ID): the 20 scopes with the most, the "
            "rest summed under (other).");
  // The series of boxcar_inbox_blocked_keys_by_scope set last, per consumer, to remove
  // those of scopes no longer blocked.
  std::mutex blocked_scopes_mutex;
  std::map<std::string, std::map<std::string, Gauge*>> blocked_scope_series;
  Family<Gauge>& inbox_oldest_blocked_age =
      gauge(*registry, "boxcar_inbox_oldest_blocked_age_seconds",
            "How long the longest-blocked ordering key of a consumer has been blocked; 0 when none.");
  Family<Gauge>& outbox_events =
      gauge(*registry, "boxcar_outbox_events",
            "Outbox events by status (PENDING, RETRYABLE, PUBLISHING, DEAD not discarded) at the last collection.");
  Gauge& outbox_oldest_unpublished_age =
      gauge(*registry, "boxcar_outbox_oldest_unpublished_age_seconds",
            "Age of the oldest PENDING/RETRYABLE/PUBLISHING outbox event; 0 when none.")
          .Add({});
  Family<Gauge>& table_dead_tuples =
      gauge(*registry, "boxcar_table_dead_tuples", "pg_stat_user_tables.n_dead_tup of a Boxcar table.");
  Family<Gauge>& table_size_bytes =
      gauge(*registry, "boxcar_table_size_bytes", "pg_total_relation_size of a Boxcar table (heap, indexes, TOAST).");
  Gauge& notify_queue_usage =
      gauge(*registry, "boxcar_database_notify_queue_usage_ratio",
            "pg_notification_queue_usage(): the fraction of the cluster's NOTIFY queue in use, held back by the "
            "listener that has read the least; at 1 every NOTIFY in the cluster fails.")
          .Add({});
  Gauge& xmin_horizon_age =
      gauge(*registry, "boxcar_database_xmin_horizon_age_transactions",
            "Transactions between the current one and the oldest xmin (a session's snapshot or transaction, a "
            "standby's feedback, a replication slot, a prepared transaction) that holds back VACUUM on this "
            "database; 0 when none.")
          .Add({});
  Gauge& collection_seconds =
      gauge(*registry, "boxcar_backlog_collection_seconds", "Duration of the last backlog collection.").Add({});
  Counter& collection_errors = counter(*registry, "boxcar_backlog_collection_errors_total",
                                       "Backlog collections that failed (the backlog gauges keep their last values).")
                                   .Add({});
  // Not in the header's list: lets an alert tell "collector stopped or failing" from
  // "backlog stable" without relying on the errors counter alone.
  Gauge& collection_last_success = gauge(*registry, "boxcar_backlog_last_success_timestamp_seconds",
                                         "Unix time of the last successful backlog collection; 0 before the first.")
                                       .Add({});
  Family<Gauge>& snapshot_age = gauge(*registry, "boxcar_backlog_snapshot_age_seconds",
                                      "Age of the fleet's backlog figures (one process computes them per interval) "
                                      "this process exported at its last collection.");
  // Retention (set by the janitor).
  Gauge& janitor_leader =
      gauge(*registry, "boxcar_janitor_leader", "1 while this process holds its schema's janitor lock, else 0.")
          .Add({});
  Family<Counter>& janitor_runs =
      counter(*registry, "boxcar_janitor_runs_total", "Janitor runs of this process by outcome (ok, error).");
  Counter& janitor_partitions_created =
      counter(*registry, "boxcar_janitor_partitions_created_total", "Outbox partitions the janitor created ahead.")
          .Add({});
  Counter& janitor_partitions_retired =
      counter(*registry, "boxcar_janitor_partitions_retired_total",
              "Outbox partitions the janitor detached and dropped (every event finished and past retention).")
          .Add({});
  Family<Counter>& janitor_rows_purged =
      counter(*registry, "boxcar_janitor_rows_purged_total",
              "Rows the janitor removed: COMPLETED inbox receipts deleted, outbox events in dropped partitions.");
  Gauge& janitor_blocked_partitions =
      gauge(*registry, "boxcar_janitor_blocked_partitions",
            "Outbox partitions past retention that the janitor keeps because an event in them is unfinished "
            "(PENDING, WAITING, PUBLISHING, RETRYABLE, or DEAD not discarded).")
          .Add({});
  Family<Counter>& snapshot_computed =
      counter(*registry, "boxcar_backlog_snapshot_computed_total",
              "Backlog collections in which this process computed the fleet's figures itself.");
};

Metrics::Metrics() : impl_(std::make_unique<Impl>()) {}
Metrics::~Metrics() = default;

void Metrics::accept_result(const std::string& consumer, std::string_view result) {
  impl_->accept_total.Add({{"consumer", consumer}, {"result", std::string(result)}}).Increment();
}

void Metrics::processed(const std::string& consumer, const std::string& event_type, std::string_view outcome) {
  impl_->processed_total.Add({{"consumer", consumer}, {"event_type", event_type}, {"outcome", std::string(outcome)}})
      .Increment();
}

void Metrics::handler_duration(const std::string& consumer, double seconds) {
  impl_->handler_seconds.Add({{"consumer", consumer}}, kHandlerBuckets).Observe(non_negative(seconds));
}

void Metrics::accept_to_complete(const std::string& consumer, double seconds) {
  impl_->accept_to_complete_seconds.Add({{"consumer", consumer}}, kLatencyBuckets).Observe(non_negative(seconds));
}

void Metrics::claimed(const std::string& consumer, std::size_t batch) {
  impl_->claimed_total.Add({{"consumer", consumer}}).Increment(static_cast<double>(batch));
  impl_->claim_batch_size.Add({}, kBatchBuckets).Observe(static_cast<double>(batch));
}

void Metrics::claim_statement(const std::string& consumer) {
  impl_->claims_total.Add({{"consumer", consumer}}).Increment();
}

void Metrics::abandoned_handler() { impl_->abandoned_handlers.Increment(); }

void Metrics::infrastructure_retry(const std::string& consumer, std::string_view reason) {
  impl_->infrastructure_retries.Add({{"consumer", consumer}, {"reason", std::string(reason)}}).Increment();
}

void Metrics::crash_strike(const std::string& consumer) {
  impl_->crash_strikes.Add({{"consumer", consumer}}).Increment();
}

void Metrics::emitted(const std::string& event_type, const std::string& topic) {
  impl_->emitted_total.Add({{"event_type", event_type}, {"topic", topic}}).Increment();
}

void Metrics::published(const std::string& topic, std::string_view outcome, std::size_t count) {
  impl_->published_total.Add({{"topic", topic}, {"outcome", std::string(outcome)}})
      .Increment(static_cast<double>(count));
}

void Metrics::emit_to_delivered(const std::string& topic, double seconds) {
  impl_->emit_to_delivered_seconds.Add({{"topic", topic}}, kLatencyBuckets).Observe(non_negative(seconds));
}

void Metrics::set_in_flight_events(std::size_t events) { impl_->in_flight_events.Set(static_cast<double>(events)); }

void Metrics::set_inbox_receipts(const std::string& consumer, std::string_view status, double count) {
  impl_->inbox_receipts.Add({{"consumer", consumer}, {"status", std::string(status)}}).Set(count);
}

void Metrics::set_inbox_receipts_estimated(const std::string& consumer, std::string_view status, bool estimated) {
  impl_->inbox_receipts_estimated.Add({{"consumer", consumer}, {"status", std::string(status)}})
      .Set(estimated ? 1.0 : 0.0);
}

void Metrics::set_inbox_oldest_due_age(const std::string& consumer, double seconds) {
  impl_->inbox_oldest_due_age.Add({{"consumer", consumer}}).Set(non_negative(seconds));
}

void Metrics::set_inbox_blocked_keys(const std::string& consumer, double keys, double oldest_age_seconds) {
  impl_->inbox_blocked_keys.Add({{"consumer", consumer}}).Set(keys);
  impl_->inbox_oldest_blocked_age.Add({{"consumer", consumer}}).Set(non_negative(oldest_age_seconds));
}

void Metrics::set_inbox_blocked_keys_by_scope(const std::string& consumer,
                                              const std::map<std::string, double>& by_scope) {
  std::lock_guard lock(impl_->blocked_scopes_mutex);
  auto& series = impl_->blocked_scope_series[consumer];
  for (auto it = series.begin(); it != series.end();) {
    if (by_scope.contains(it->first)) {
      ++it;
      continue;
    }
    impl_->inbox_blocked_keys_by_scope.Remove(it->second);
    it = series.erase(it);
  }
  for (const auto& [scope, keys] : by_scope) {
    Gauge*& gauge = series[scope];
    if (!gauge) gauge = &impl_->inbox_blocked_keys_by_scope.Add({{"consumer", consumer}, {"scope", scope}});
    gauge->Set(keys);
  }
}

void Metrics::set_outbox_events(std::string_view status, double count) {
  impl_->outbox_events.Add({{"status", std::string(status)}}).Set(count);
}

void Metrics::set_outbox_oldest_unpublished_age(double seconds) {
  impl_->outbox_oldest_unpublished_age.Set(non_negative(seconds));
}

void Metrics::set_table_health(const std::string& table, double dead_tuples, double size_bytes) {
  impl_->table_dead_tuples.Add({{"table", table}}).Set(dead_tuples);
  impl_->table_size_bytes.Add({{"table", table}}).Set(size_bytes);
}

void Metrics::set_notify_queue_usage(double ratio) { impl_->notify_queue_usage.Set(ratio); }
void Metrics::set_xmin_horizon_age(double transactions) { impl_->xmin_horizon_age.Set(non_negative(transactions)); }

void Metrics::backlog_collected(double seconds, bool ok) {
  impl_->collection_seconds.Set(non_negative(seconds));
  if (ok) {
    impl_->collection_last_success.SetToCurrentTime();
  } else {
    impl_->collection_errors.Increment();
  }
}

void Metrics::backlog_snapshot(std::string_view section, double age_seconds, bool computed_here) {
  const prometheus::Labels labels{{"section", std::string(section)}};
  impl_->snapshot_age.Add(labels).Set(non_negative(age_seconds));
  auto& computed = impl_->snapshot_computed.Add(labels);  // exported as 0 until it computes
  if (computed_here) computed.Increment();
}

void Metrics::set_janitor_leader(bool leader) { impl_->janitor_leader.Set(leader ? 1.0 : 0.0); }

void Metrics::janitor_run(bool ok, std::int64_t partitions_created, std::int64_t partitions_retired,
                          std::int64_t inbox_rows, std::int64_t outbox_rows, std::int64_t blocked_partitions) {
  impl_->janitor_runs.Add({{"outcome", ok ? "ok" : "error"}}).Increment();
  impl_->janitor_partitions_created.Increment(static_cast<double>(partitions_created));
  impl_->janitor_partitions_retired.Increment(static_cast<double>(partitions_retired));
  impl_->janitor_rows_purged.Add({{"table", "inbox_receipts"}}).Increment(static_cast<double>(inbox_rows));
  impl_->janitor_rows_purged.Add({{"table", "outbox_events"}}).Increment(static_cast<double>(outbox_rows));
  if (ok) impl_->janitor_blocked_partitions.Set(static_cast<double>(blocked_partitions));
}

std::string Metrics::serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer{}.Serialize(out, impl_->registry->Collect());
  return out.str();
}

}  // namespace boxcar
