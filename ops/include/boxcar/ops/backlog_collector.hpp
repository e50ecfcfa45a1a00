// boxcar::BacklogCollector — the background service that keeps the backlog gauges of
// boxcar::Metrics current: inbox receipts per consumer and status, the oldest due age per
// consumer, outbox events per status and the oldest unpublished age, dead tuples and size
// of the two tables.
//
// Why a collector instead of computing on scrape: a scrape must be cheap and must not
// hit the database however often Prometheus (or several of them) scrapes; the gauges are
// refreshed every `interval` by a handful of queries, each one scan of a partial index
// whose size is the backlog (never the retained COMPLETED / PUBLISHED rows, which are not
// counted). See docs/operations.md for the queries, their plans and their cost.
//
// Thread-safety: start(), stop() and collect_once() may be called from any thread;
// collections never overlap (collect_once() and the background thread serialise).
#pragma once

#include <chrono>
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
  /// Time between two collections (the first runs as soon as start() is called).
  std::chrono::milliseconds interval{15000};
};

class BacklogCollector {
 public:
  /// One backlog query with its name, bound to a schema (for EXPLAIN checks and docs).
  struct NamedQuery {
    std::string name;
    std::string sql;
  };

  /// @throws ConfigError ("schema", "metrics.backlog_interval_ms", "backlog.pool",
  ///   "backlog.metrics") for an invalid schema, a non-positive interval or a null
  ///   pool or metrics. Does not touch the database.
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

  /// Runs one collection now on a pooled connection, in one short read-only
  /// transaction, and sets every backlog gauge. Records its duration and outcome with
  /// Metrics::backlog_collected().
  /// Every figure is read before any gauge is set, so a failed collection changes no
  /// backlog gauge (only the collection duration and the errors counter).
  /// @throws DatabaseError when the database cannot be reached or a query fails.
  void collect_once();

  /// Every query collect_once() runs, with `{schema}` bound to `schema`.
  static std::vector<NamedQuery> queries(std::string_view schema);

  const BacklogOptions& options() const noexcept { return options_; }

 private:
  struct State;
  BacklogOptions options_;
  std::shared_ptr<ConnectionPool> pool_;
  std::shared_ptr<Metrics> metrics_;
  std::unique_ptr<State> state_;
};

}  // namespace boxcar
