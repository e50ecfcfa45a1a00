// The backlog collector: reads every backlog figure in one short read-only transaction,
// then sets the gauges, so a failed collection changes none of them.
#include "boxcar/ops/backlog_collector.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "backlog_queries.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/core/detail/with_schema.hpp"

namespace boxcar {

namespace {

namespace sql = detail::backlog_sql;

// A collection is a few index scans; one that takes this long is stuck (lock queue,
// overloaded server) and should fail and be retried rather than hold a connection.
constexpr int kStatementTimeoutMs = 10000;

constexpr std::string_view kInboxStatuses[] = {"PENDING", "RETRYABLE", "PROCESSING", "DEAD"};
constexpr std::string_view kOutboxStatuses[] = {"PENDING", "RETRYABLE", "PUBLISHING", "DEAD"};
constexpr std::string_view kTables[] = {"inbox_receipts", "outbox_events"};

// Consumers found in the table but not declared are reported one by one up to this many
// (orphans of renamed consumers); the rest are summed under kUndeclared. Consumer names
// in rows are whatever a role able to insert wrote: labels must stay bounded.
constexpr std::size_t kMaxUndeclaredConsumers = 20;
const std::string kUndeclared = "(undeclared)";

struct ConsumerBacklog {
  std::map<std::string, double, std::less<>> by_status;  // missing status = 0
  double oldest_due_age = 0;
};

struct TableHealth {
  double dead_tuples = 0;
  double size_bytes = 0;
};

/// Everything one collection read, before any gauge is touched.
struct Snapshot {
  std::map<std::string, ConsumerBacklog> consumers;
  std::map<std::string, double, std::less<>> outbox;
  double outbox_oldest_age = 0;
  std::map<std::string, TableHealth, std::less<>> tables;
  // What this session's role may read (least-privilege roles, docs/security.md): the
  // other table's gauges are left alone; a process whose role reads it reports them.
  bool inbox_readable = true;
  bool outbox_readable = true;
};

}  // namespace

struct BacklogCollector::State {
  std::vector<NamedQuery> queries;
  std::vector<std::string> names;  // prepared statement names, per schema

  std::mutex collect_mutex;               // one collection at a time
  std::set<std::string> known_consumers;  // every consumer ever reported (guarded by collect_mutex)
  std::set<std::string> declared;         // options.declared_consumers
  std::size_t undeclared_reported = 0;    // undeclared consumers in known_consumers

  std::mutex mutex;  // guards stopping and thread
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;
};

std::vector<BacklogCollector::NamedQuery> BacklogCollector::queries(std::string_view schema) {
  return {{"inbox_claimable", detail::with_schema(sql::kInboxClaimable, schema)},
          {"inbox_processing", detail::with_schema(sql::kInboxProcessing, schema)},
          {"inbox_dead", detail::with_schema(sql::kInboxDead, schema)},
          {"outbox_due", detail::with_schema(sql::kOutboxDue, schema)},
          {"outbox_publishing", detail::with_schema(sql::kOutboxPublishing, schema)},
          {"outbox_dead", detail::with_schema(sql::kOutboxDead, schema)},
          {"table_health", std::string(sql::kTableHealth)},
          {"readable_tables", std::string(sql::kReadableTables)}};
}

BacklogCollector::BacklogCollector(std::shared_ptr<ConnectionPool> pool, std::shared_ptr<Metrics> metrics,
                                   BacklogOptions options)
    : options_(std::move(options)),
      pool_(std::move(pool)),
      metrics_(std::move(metrics)),
      state_(std::make_unique<State>()) {
  validate_schema_name(options_.schema, "schema");
  if (!pool_) throw ConfigError("backlog.pool", "a connection pool is required");
  if (!metrics_) throw ConfigError("backlog.metrics", "the collector only sets metrics: a Metrics is required");
  if (options_.interval <= std::chrono::milliseconds::zero())
    throw ConfigError("metrics.backlog_interval_ms", "must be positive");
  state_->queries = queries(options_.schema);
  for (const auto& query : state_->queries)
    state_->names.push_back("boxcar.backlog." + query.name + "." + options_.schema);
  state_->known_consumers.insert(options_.declared_consumers.begin(), options_.declared_consumers.end());
  state_->declared.insert(options_.declared_consumers.begin(), options_.declared_consumers.end());
}

BacklogCollector::~BacklogCollector() { stop(); }

void BacklogCollector::start() {
  std::lock_guard lock(state_->mutex);
  if (state_->thread.joinable()) return;
  state_->stopping = false;
  state_->thread = std::thread([this] {
    auto log = logger("runtime");
    std::unique_lock lock(state_->mutex);
    while (!state_->stopping) {
      lock.unlock();
      try {
        collect_once();
      } catch (const std::exception& e) {
        log->warn("backlog collection failed (gauges keep their last values): {}", e.what());
      }
      lock.lock();
      state_->wake.wait_for(lock, options_.interval, [this] { return state_->stopping; });
    }
  });
}

void BacklogCollector::stop() {
  std::thread thread;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    thread = std::move(state_->thread);
  }
  state_->wake.notify_all();
  if (thread.joinable()) thread.join();
}

void BacklogCollector::collect_once() {
  std::lock_guard collect(state_->collect_mutex);
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };

  Snapshot snapshot;
  try {
    Tx tx = pool_->begin(LoanUse::BoxcarOnly);  // SET LOCAL and its own queries only
    tx.exec("SET TRANSACTION READ ONLY");
    tx.exec("SET LOCAL statement_timeout = " + std::to_string(kStatementTimeoutMs));
    const auto& q = state_->queries;
    const auto& n = state_->names;

    const auto readable = tx.exec_prepared(n[7], q[7].sql, options_.schema).at(0);
    snapshot.inbox_readable = readable["inbox"].as<bool>();
    snapshot.outbox_readable = readable["outbox"].as<bool>();

    if (snapshot.inbox_readable) {
      for (const auto& row : tx.exec_prepared(n[0], q[0].sql)) {
        auto& consumer = snapshot.consumers[row["consumer"].as<std::string>()];
        consumer.by_status["PENDING"] = row["pending"].as<double>();
        consumer.by_status["RETRYABLE"] = row["retryable"].as<double>();
        consumer.oldest_due_age = row["oldest_due_age"].as<double>();
      }
      for (const auto& row : tx.exec_prepared(n[1], q[1].sql))
        snapshot.consumers[row["consumer"].as<std::string>()].by_status["PROCESSING"] = row["processing"].as<double>();
      for (const auto& row : tx.exec_prepared(n[2], q[2].sql))
        snapshot.consumers[row["consumer"].as<std::string>()].by_status["DEAD"] = row["dead"].as<double>();
    }

    if (snapshot.outbox_readable) {
      const auto due = tx.exec_prepared(n[3], q[3].sql).at(0);
      snapshot.outbox["PENDING"] = due["pending"].as<double>();
      snapshot.outbox["RETRYABLE"] = due["retryable"].as<double>();
      const auto publishing = tx.exec_prepared(n[4], q[4].sql).at(0);
      snapshot.outbox["PUBLISHING"] = publishing["publishing"].as<double>();
      snapshot.outbox_oldest_age = std::max(due["oldest_age"].as<double>(), publishing["oldest_age"].as<double>());
      snapshot.outbox["DEAD"] = tx.exec_prepared(n[5], q[5].sql).at(0)["dead"].as<double>();
    }

    for (const auto& row : tx.exec_prepared(n[6], q[6].sql, options_.schema)) {
      const auto table = row["table_name"].as<std::string>();
      if (table == "inbox_receipts" ? snapshot.inbox_readable : snapshot.outbox_readable)
        snapshot.tables[table] = {row["dead_tuples"].as<double>(), row["size_bytes"].as<double>()};
    }
    tx.commit();
  } catch (...) {
    metrics_->backlog_collected(elapsed(), false);
    // Non-database exceptions (a pqxx conversion error, bad_alloc) propagate unchanged.
    throw detail::to_database_error(std::current_exception(), "collecting the backlog metrics", false);
  }

  // Every consumer ever seen keeps being reported: one whose rows are gone drops to 0
  // instead of freezing at its last value.
  // Undeclared ones beyond kMaxUndeclaredConsumers are summed under one label.
  if (snapshot.inbox_readable) {
    ConsumerBacklog folded;
    bool any_folded = false;
    for (auto it = snapshot.consumers.begin(); it != snapshot.consumers.end();) {
      const std::string& name = it->first;
      if (state_->known_consumers.contains(name)) {
        ++it;
        continue;
      }
      if (state_->declared.contains(name) || state_->undeclared_reported < kMaxUndeclaredConsumers) {
        if (!state_->declared.contains(name)) ++state_->undeclared_reported;
        state_->known_consumers.insert(name);
        ++it;
        continue;
      }
      for (const auto& [status, count] : it->second.by_status) folded.by_status[status] += count;
      folded.oldest_due_age = std::max(folded.oldest_due_age, it->second.oldest_due_age);
      any_folded = true;
      it = snapshot.consumers.erase(it);
    }
    if (any_folded) {
      snapshot.consumers[kUndeclared] = std::move(folded);
      state_->known_consumers.insert(kUndeclared);
    }
    for (const auto& consumer : state_->known_consumers) {
      const auto found = snapshot.consumers.find(consumer);
      const ConsumerBacklog empty{};
      const auto& backlog = found == snapshot.consumers.end() ? empty : found->second;
      for (auto status : kInboxStatuses) {
        const auto value = backlog.by_status.find(status);
        metrics_->set_inbox_receipts(consumer, status, value == backlog.by_status.end() ? 0.0 : value->second);
      }
      metrics_->set_inbox_oldest_due_age(consumer, backlog.oldest_due_age);
    }
  }
  if (snapshot.outbox_readable) {
    for (auto status : kOutboxStatuses) metrics_->set_outbox_events(status, snapshot.outbox[std::string(status)]);
    metrics_->set_outbox_oldest_unpublished_age(snapshot.outbox_oldest_age);
  }
  for (auto table : kTables) {
    const auto found = snapshot.tables.find(table);
    if (found != snapshot.tables.end())
      metrics_->set_table_health(std::string(table), found->second.dead_tuples, found->second.size_bytes);
  }
  metrics_->backlog_collected(elapsed(), true);
}

}  // namespace boxcar
