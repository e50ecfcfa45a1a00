// boxcar::BacklogCollector — the background service that keeps the backlog gauges of
// boxcar::Metrics current: inbox receipts per consumer and status, the oldest due age per
// consumer, outbox events per status and the oldest unpublished age, dead tuples and size
// of the two tables.
//
// Why a collector instead of computing on scrape: a scrape must be cheap and must not
// hit the database however often Prometheus (or several of them) scrapes; the gauges are
// refreshed every `interval`.
//
// One collection for the whole fleet: every process runs a collector, but per section
// (inbox, outbox) only one process computes the figures per interval — the one that finds
// the section's row of `{schema}.backlog_snapshot` older than its interval and wins its
// row lock (FOR NO KEY UPDATE SKIP LOCKED) — and stores them there; every other process
// exports the stored figures, so any scrape target shows the same gauges. A process that
// dies while computing releases the lock; the next cycle of another one computes.
//
// Bounded cost: the inbox counts read at most `exact_cap` + 1 index entries per consumer
// and status group; above the cap the exported count is an estimate from ANALYZE's
// statistics (boxcar_inbox_receipts_estimated = 1). The oldest due age is always exact
// (one index lookup per consumer). See docs/operations.md for the queries, their plans
// and their cost.
//
// Thread-safety: start(), stop() and collect_once() may be called from any thread;
// collections never overlap (collect_once() and the background thread serialise).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/metrics.hpp"

namespace boxcar {

struct BacklogOptions {
  /// Schema holding inbox_receipts and outbox_events.
  std::string schema = "boxcar";
  /// Consumers this deployment declares. Each gets all its gauges (0 when it has no
  /// rows), so a consumer with a backlog and no worker, or one that is declared but
  /// never receives anything, is visible. Consumers found in the table but not declared
  /// are reported too, the first 20 each under its name and any more summed under
  /// consumer="(undeclared)", so rows cannot grow the number of series without bound.
  std::vector<std::string> declared_consumers{};
  /// Time between two collections (the first runs as soon as start() is called). Also
  /// the age from which the fleet's stored figures are recomputed.
  std::chrono::milliseconds interval{15000};
  /// Inbox counts up to this many receipts per consumer and status group are exact; above
  /// it, estimated (boxcar_inbox_receipts_estimated = 1). Bounds a collection's reads to
  /// about exact_cap index entries per consumer whatever the backlog.
  std::int64_t exact_cap = 1000;
  /// Who computed the stored figures (backlog_snapshot.collected_by); empty: host/pid/n.
  std::string identity{};
};

class BacklogCollector {
 public:
  /// One backlog query with its name, bound to a schema (for EXPLAIN checks and docs).
  struct NamedQuery {
    std::string name;
    std::string sql;
  };

  /// @throws ConfigError ("schema", "metrics.backlog_interval_ms", "metrics.backlog_exact_cap",
  ///   "backlog.pool", "backlog.metrics") for an invalid schema, a non-positive interval or
  ///   cap, or a null pool or metrics. Does not touch the database.
  BacklogCollector(std::shared_ptr<ConnectionPool> pool, std::shared_ptr<Metrics> metrics, BacklogOptions options = {});
  /// Stops the background thread (see stop()).
  ~BacklogCollector();
  BacklogCollector(const BacklogCollector&) = delete;
  BacklogCollector& operator=(const BacklogCollector&) = delete;

  /// Starts the background thread: a collection now, then one every interval. A failed
  /// collection is logged (logger "runtime") and counted; the gauges keep their last
  /// values and the next interval tries again. Does nothing if already running.
  void start();
  /// Stops the background thread and waits for a running collection to finish (bounded
  /// by the statement timeout). Idempotent; does not block when not started.
  void stop();

  /// Runs one collection now on a pooled connection, in one short transaction, and sets
  /// every backlog gauge: per section, computes the figures and stores them in
  /// backlog_snapshot when elected (see above), otherwise reads the stored ones. Records
  /// its duration and outcome with Metrics::backlog_collected() and, per section, the
  /// figures' age and whether this process computed them with Metrics::backlog_snapshot().
  /// Every figure is read before any gauge is set, so a failed collection changes no
  /// backlog gauge (only the collection duration and the errors counter).
  /// @throws DatabaseError when the database cannot be reached or a query fails.
  void collect_once();

  /// Every query collect_once() runs, with `{schema}` bound to `schema`.
  static std::vector<NamedQuery> queries(std::string_view schema);

  const BacklogOptions& options() const noexcept { return options_; }
  /// backlog_snapshot.collected_by of the figures this collector computes.
  const std::string& identity() const noexcept { return options_.identity; }

 private:
  struct State;
  BacklogOptions options_;
  std::shared_ptr<ConnectionPool> pool_;
  std::shared_ptr<Metrics> metrics_;
  std::unique_ptr<State> state_;
};

}  // namespace boxcar
