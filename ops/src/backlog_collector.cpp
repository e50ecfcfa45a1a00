// The backlog collector: per section, either computes the figures (when elected through
// backlog_snapshot) and stores them, or reads the fleet's stored figures — all in one short
// transaction — then sets the gauges, so a failed collection changes none of them.
#include "boxcar/ops/backlog_collector.hpp"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "backlog_queries.hpp"
#include "operator_support.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/periodic_thread.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/scope.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/core/detail/with_schema.hpp"

namespace boxcar {

namespace {

namespace sql = detail::backlog_sql;

// A collection is a few index scans; one that takes this long is stuck (lock queue,
// overloaded server) and should fail and be retried rather than hold a connection.
constexpr int kStatementTimeoutMs = 10000;

constexpr std::string_view kInboxStatuses[] = {"PENDING", "RETRYABLE", "PROCESSING", "DEAD", "WAITING"};
constexpr std::string_view kOutboxStatuses[] = {"PENDING", "WAITING", "RETRYABLE", "PUBLISHING", "DEAD"};
constexpr std::string_view kTables[] = {"inbox_receipts", "outbox_events"};

// Consumers found in the table but not declared are reported one by one up to this many
// (orphans of renamed consumers); the rest are summed under kUndeclared. Consumer names
// in rows are whatever a role able to insert wrote: labels must stay bounded.
constexpr std::size_t kMaxUndeclaredConsumers = 20;
const std::string kUndeclared = "(undeclared)";
// A consumer's blocked keys are labelled by scope for this many scopes (those with the
// most); the rest are summed under kOtherScopes. Scopes are tenants: bounded labels.
constexpr std::size_t kMaxBlockedScopes = 20;
const std::string kOtherScopes = "(other)";

struct ConsumerBacklog {
  std::map<std::string, double, std::less<>> by_status;  // missing status = 0
  std::set<std::string, std::less<>> estimated;          // statuses above the exact cap
  double oldest_due_age = 0;
  // Ordering keys whose head failed, and how long the longest-blocked one has been.
  double blocked_keys = 0;
  double oldest_blocked_age = 0;
  // The blocked keys per scope (`global`, `tenant:ID`), at most kMaxBlockedScopes of them
  // and kOtherScopes.
  std::map<std::string, double> blocked_by_scope;
};

// Keeps the kMaxBlockedScopes scopes with the most blocked keys (the first in scope order
// among equals) and sums the others under kOtherScopes.
std::map<std::string, double> bounded_scopes(std::map<std::string, double> by_scope) {
  if (by_scope.size() <= kMaxBlockedScopes) return by_scope;
  std::vector<std::pair<std::string, double>> ranked(by_scope.begin(), by_scope.end());
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::map<std::string, double> kept;
  double other = 0;
  for (std::size_t i = 0; i < ranked.size(); ++i) {
    if (i < kMaxBlockedScopes) {
      kept.insert(ranked[i]);
    } else {
      other += ranked[i].second;
    }
  }
  kept[kOtherScopes] += other;
  return kept;
}

struct TableHealth {
  double dead_tuples = 0;
  double size_bytes = 0;
};

// How a collection came by one section's figures (inbox, outbox).
struct Section {
  // Whether this session's role may read the section's table (least-privilege roles,
  // docs/security.md): the other table's gauges are left alone; a process whose role reads
  // it reports them.
  bool readable = true;
  // Whether figures exist (this process computed them, or read what another one stored):
  // false before any process computed them.
  bool known = false;
  // This process computed them; otherwise they are the stored ones, `age` seconds old.
  bool computed = false;
  double age = 0;
};

/// Everything one collection read, before any gauge is touched.
struct Snapshot {
  std::map<std::string, ConsumerBacklog> consumers;
  std::map<std::string, double, std::less<>> outbox;
  double outbox_oldest_age = 0;
  std::map<std::string, TableHealth, std::less<>> tables;
  double notify_queue_usage = 0;
  double xmin_horizon_age = 0;
  Section inbox_section;
  Section outbox_section;
};

// The figures of each section as stored in backlog_snapshot.figures: raw per consumer
// (every process folds undeclared consumers against its own declarations).
nlohmann::json inbox_figures(const std::map<std::string, ConsumerBacklog>& consumers) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, backlog] : consumers) {
    nlohmann::json& entry = out[name];
    for (const auto& [status, count] : backlog.by_status) entry["counts"][status] = count;
    entry["estimated"] = backlog.estimated;
    entry["oldest_due_age"] = backlog.oldest_due_age;
    entry["blocked_keys"] = backlog.blocked_keys;
    entry["oldest_blocked_age"] = backlog.oldest_blocked_age;
    entry["blocked_by_scope"] = backlog.blocked_by_scope;
  }
  return {{"consumers", std::move(out)}};
}

std::map<std::string, ConsumerBacklog> inbox_from_figures(const nlohmann::json& figures) {
  std::map<std::string, ConsumerBacklog> consumers;
  for (const auto& [name, entry] : figures.at("consumers").items()) {
    auto& backlog = consumers[name];
    for (const auto& [status, count] : entry.at("counts").items()) backlog.by_status[status] = count.get<double>();
    for (const auto& status : entry.at("estimated")) backlog.estimated.insert(status.get<std::string>());
    backlog.oldest_due_age = entry.at("oldest_due_age").get<double>();
    // Figures stored by a process of an older release have no key figures.
    backlog.blocked_keys = entry.value("blocked_keys", 0.0);
    backlog.oldest_blocked_age = entry.value("oldest_blocked_age", 0.0);
    if (entry.contains("blocked_by_scope"))
      for (const auto& [scope, keys] : entry.at("blocked_by_scope").items()) backlog.blocked_by_scope[scope] = keys;
  }
  return consumers;
}

nlohmann::json outbox_figures(const Snapshot& snapshot) {
  return {{"counts", snapshot.outbox}, {"oldest_age", snapshot.outbox_oldest_age}};
}

void outbox_from_figures(const nlohmann::json& figures, Snapshot& snapshot) {
  for (const auto& [status, count] : figures.at("counts").items()) snapshot.outbox[status] = count.get<double>();
  snapshot.outbox_oldest_age = figures.at("oldest_age").get<double>();
}

// Adds `from`'s figures to `into`'s: counts and keys sum, ages take the oldest.
void merge_into(ConsumerBacklog& into, const ConsumerBacklog& from) {
  for (const auto& [status, count] : from.by_status) into.by_status[status] += count;
  into.estimated.insert(from.estimated.begin(), from.estimated.end());
  into.oldest_due_age = std::max(into.oldest_due_age, from.oldest_due_age);
  into.blocked_keys += from.blocked_keys;
  for (const auto& [scope, keys] : from.blocked_by_scope) into.blocked_by_scope[scope] += keys;
  into.oldest_blocked_age = std::max(into.oldest_blocked_age, from.oldest_blocked_age);
}

// The consumers the inbox gauges are labelled with. Every consumer ever seen keeps being
// reported: one whose rows are gone drops to 0 instead of freezing at its last value.
// Undeclared ones beyond kMaxUndeclaredConsumers are summed under one label, kUndeclared.
class ConsumerLabels {
 public:
  explicit ConsumerLabels(const std::vector<std::string>& declared)
      : known_(declared.begin(), declared.end()), declared_(declared.begin(), declared.end()) {}

  // Labels the new consumers of `consumers` while the undeclared ones stay within bounds,
  // and folds the others into one kUndeclared entry.
  void fold(std::map<std::string, ConsumerBacklog>& consumers) {
    ConsumerBacklog folded;
    bool any_folded = false;
    for (auto it = consumers.begin(); it != consumers.end();) {
      const std::string& name = it->first;
      if (known_.contains(name)) {
        ++it;
        continue;
      }
      if (declared_.contains(name) || undeclared_reported_ < kMaxUndeclaredConsumers) {
        if (!declared_.contains(name)) ++undeclared_reported_;
        known_.insert(name);
        ++it;
        continue;
      }
      merge_into(folded, it->second);
      any_folded = true;
      it = consumers.erase(it);
    }
    if (any_folded) {
      folded.blocked_by_scope = bounded_scopes(std::move(folded.blocked_by_scope));
      consumers[kUndeclared] = std::move(folded);
      known_.insert(kUndeclared);
    }
  }

  // Every consumer ever reported.
  const std::set<std::string>& known() const { return known_; }

 private:
  std::set<std::string> known_;
  std::set<std::string> declared_;       // BacklogOptions::declared_consumers
  std::size_t undeclared_reported_ = 0;  // undeclared consumers in known_
};

// host/pid/n: unique per collector in the fleet (n tells apart collectors of one process).
std::string default_identity() {
  static std::atomic<int> next{0};
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + "/" + std::to_string(getpid()) + "/" + std::to_string(++next);
}

}  // namespace

struct BacklogCollector::State {
  explicit State(const std::vector<std::string>& declared_consumers) : labels(declared_consumers) {}

  std::vector<NamedQuery> queries;
  std::vector<std::string> names;  // prepared statement names, per schema

  std::mutex collect_mutex;  // one collection at a time
  ConsumerLabels labels;     // guarded by collect_mutex

  detail::PeriodicThread thread;
};

std::vector<BacklogCollector::NamedQuery> BacklogCollector::queries(std::string_view schema) {
  return {{"inbox_claimable", detail::with_schema(sql::kInboxClaimable, schema)},
          {"inbox_processing", detail::with_schema(sql::kInboxProcessing, schema)},
          {"inbox_dead", detail::with_schema(sql::kInboxDead, schema)},
          {"outbox_due", detail::with_schema(sql::kOutboxDue, schema)},
          {"outbox_publishing", detail::with_schema(sql::kOutboxPublishing, schema)},
          {"outbox_dead", detail::with_schema(sql::kOutboxDead, schema)},
          {"outbox_waiting", detail::with_schema(sql::kOutboxWaiting, schema)},
          {"table_health", std::string(sql::kTableHealth)},
          {"readable_tables", std::string(sql::kReadableTables)},
          {"inbox_estimates", std::string(sql::kInboxEstimates)},
          {"snapshot_claim", detail::with_schema(sql::kSnapshotClaim, schema)},
          {"snapshot_store", detail::with_schema(sql::kSnapshotStore, schema)},
          {"snapshot_read", detail::with_schema(sql::kSnapshotRead, schema)},
          {"inbox_waiting", detail::with_schema(sql::kInboxWaiting, schema)},
          {"inbox_blocked_keys", detail::with_schema(sql::kInboxBlockedKeys, schema)},
          {"notify_queue_usage", std::string(sql::kNotifyQueueUsage)},
          {"xmin_outside_sessions", std::string(sql::kXminOutsideSessions)}};
}

BacklogCollector::BacklogCollector(std::shared_ptr<ConnectionPool> pool, std::shared_ptr<Metrics> metrics,
                                   BacklogOptions options)
    : options_(std::move(options)),
      pool_(std::move(pool)),
      metrics_(std::move(metrics)),
      state_(std::make_unique<State>(options_.declared_consumers)) {
  validate_schema_name(options_.schema, "schema");
  if (!pool_) throw ConfigError("backlog.pool", "a connection pool is required");
  if (!metrics_) throw ConfigError("backlog.metrics", "the collector only sets metrics: a Metrics is required");
  if (options_.interval <= std::chrono::milliseconds::zero())
    throw ConfigError("metrics.backlog_interval_ms", "must be positive");
  if (options_.exact_cap < 1) throw ConfigError("metrics.backlog_exact_cap", "must be at least 1");
  if (options_.identity.empty()) options_.identity = default_identity();
  state_->queries = queries(options_.schema);
  for (const auto& query : state_->queries)
    state_->names.push_back("boxcar.backlog." + query.name + "." + options_.schema);
}

BacklogCollector::~BacklogCollector() { stop(); }

void BacklogCollector::start() {
  state_->thread.start(options_.interval, [this] {
    try {
      collect_once();
    } catch (const std::exception& e) {
      logger("runtime")->warn("backlog collection failed (gauges keep their last values): {}", e.what());
    }
  });
}

void BacklogCollector::stop() { state_->thread.stop(); }

namespace {

// Positions in BacklogCollector::queries().
enum Query : std::size_t {
  kClaimable,
  kProcessing,
  kDead,
  kOutboxDue,
  kOutboxPublishing,
  kOutboxDead,
  kOutboxWaiting,
  kHealth,
  kReadable,
  kEstimates,
  kClaim,
  kStore,
  kRead,
  kWaiting,
  kBlockedKeys,
  kNotifyQueueUsage,
  kXminOutsideSessions
};

// One collection's reads, in its one short transaction, into a Snapshot: what the role may
// read, each section's figures (computed when elected through backlog_snapshot, or alone;
// otherwise the fleet's stored ones), then the tables' health, the notification queue and
// the xmin horizon.
class CollectionReads {
 public:
  CollectionReads(Tx& tx, const std::vector<BacklogCollector::NamedQuery>& queries,
                  const std::vector<std::string>& names, const BacklogOptions& options, Snapshot& snapshot)
      : tx_(tx), queries_(queries), names_(names), options_(options), snapshot_(snapshot) {}

  void configure_session() {
    // One round trip for the settings (one statement: Tx::exec uses the extended protocol):
    // - the planner costs the per-consumer loops for ~100 consumers of a large backlog,
    //   past jit_above_cost: compiling them took 1.1 s here, a hundred times their run;
    // - the capped scans must walk their index in order and stop at the LIMIT; for a
    //   consumer its statistics call small the planner would pick a bitmap scan, which
    //   reads every entry of the consumer first (backlog_queries.hpp); no query of the
    //   collector gains from one;
    // - the elected process's snapshot write needs no WAL flush before the commit returns:
    //   lost in a crash, the next cycle computes the figures again.
    // set_config(..., true) is SET LOCAL.
    tx_.exec("SELECT pg_catalog.set_config('statement_timeout', '" + std::to_string(kStatementTimeoutMs) +
             "', true), pg_catalog.set_config('jit', 'off', true), pg_catalog.set_config('enable_bitmapscan', 'off', "
             "true), pg_catalog.set_config('synchronous_commit', 'off', true)");
  }

  void read_access() {
    const auto readable = run(kReadable, options_.schema).at(0);
    snapshot_.inbox_section.readable = readable["inbox"].as<bool>();
    snapshot_.outbox_section.readable = readable["outbox"].as<bool>();
    // A role without the snapshot's grants (the operator) computes alone, as before 0011.
    snapshot_read_ = readable["snapshot_read"].as<bool>();
    elects_ = snapshot_read_ && readable["snapshot_write"].as<bool>();
  }

  void read_inbox() {
    section(
        "inbox", snapshot_.inbox_section, [&] { return compute_inbox(); },
        [&](const nlohmann::json& figures) { snapshot_.consumers = inbox_from_figures(figures); });
  }

  void read_outbox() {
    section(
        "outbox", snapshot_.outbox_section, [&] { return compute_outbox(); },
        [&](const nlohmann::json& figures) { outbox_from_figures(figures, snapshot_); });
  }

  // Catalog only: cheap, so every process reads it itself.
  void read_table_health() {
    for (const auto& row : run(kHealth, options_.schema)) {
      const auto table = row["table_name"].as<std::string>();
      if (table == "inbox_receipts" ? snapshot_.inbox_section.readable : snapshot_.outbox_section.readable)
        snapshot_.tables[table] = {row["dead_tuples"].as<double>(), row["size_bytes"].as<double>()};
    }
  }

  // Cluster-wide, and as cheap: every process reads it too.
  void read_notify_queue() { snapshot_.notify_queue_usage = run(kNotifyQueueUsage).at(0)["usage"].as<double>(); }

  // This database's, and as cheap: the oldest session (the one `boxcar status` names) and
  // what no session shows. Under such a horizon every claim walks the index entries of
  // every message handled since (docs/design/held-snapshot.md).
  void read_xmin_horizon() {
    const auto holders = detail::read_xmin_holders(tx_.work(), 1);
    const double sessions = holders.empty() ? 0.0 : static_cast<double>(holders.front().xmin_age);
    snapshot_.xmin_horizon_age = std::max(sessions, run(kXminOutsideSessions).at(0)["age"].as<double>());
  }

 private:
  Tx& tx_;
  const std::vector<BacklogCollector::NamedQuery>& queries_;
  const std::vector<std::string>& names_;
  const BacklogOptions& options_;
  Snapshot& snapshot_;
  bool snapshot_read_ = false;  // the role reads backlog_snapshot
  bool elects_ = false;         // ... and writes it: computes a section only when elected
  // Consumers with at least one status above the exact cap, whose counts are estimated.
  std::set<std::string> above_cap_;

  template <typename... Parameters>
  pqxx::result run(Query query, Parameters&&... parameters) {
    return tx_.exec_prepared(names_[query], queries_[query].sql, std::forward<Parameters>(parameters)...);
  }
  long long rows_per_consumer() const { return static_cast<long long>(options_.exact_cap) + 1; }
  double cap() const { return static_cast<double>(options_.exact_cap); }

  // Computes the section (elected, or alone) and stores it when elected, else loads what
  // the elected one stored; `compute` fills the snapshot and returns the figures.
  template <typename Compute, typename Load>
  void section(const std::string& name, Section& state, const Compute& compute, const Load& load) {
    const double interval_seconds = std::chrono::duration<double>(options_.interval).count();
    if (state.readable && (!elects_ || !run(kClaim, name, interval_seconds).empty())) {
      const nlohmann::json figures = compute();
      if (elects_) run(kStore, name, figures.dump(), options_.identity);
      state.computed = true;
      state.known = true;
      return;
    }
    if (!snapshot_read_) return;
    const auto stored = run(kRead, name).at(0);
    if (!stored["computed"].as<bool>()) return;
    load(nlohmann::json::parse(stored["figures"].as<std::string>()));
    state.age = stored["age"].as<double>();
    state.known = true;
  }

  nlohmann::json compute_inbox() {
    read_claimable();
    read_capped(kProcessing, "processing", "PROCESSING");
    read_capped(kDead, "dead", "DEAD");
    read_capped(kWaiting, "waiting", "WAITING");
    read_blocked_keys();
    for (auto& [name, consumer] : snapshot_.consumers)
      consumer.blocked_by_scope = bounded_scopes(std::move(consumer.blocked_by_scope));
    if (!above_cap_.empty()) read_estimates();
    return inbox_figures(snapshot_.consumers);
  }

  void read_claimable() {
    for (const auto& row : run(kClaimable, rows_per_consumer())) {
      const auto name = row["consumer"].as<std::string>();
      auto& consumer = snapshot_.consumers[name];
      consumer.by_status["PENDING"] = row["pending"].as<double>();
      consumer.by_status["RETRYABLE"] = row["retryable"].as<double>();
      consumer.oldest_due_age = row["oldest_due_age"].as<double>();
      // One scan reads both statuses: above the cap, neither is known exactly.
      if (row["seen"].as<double>() > cap()) {
        consumer.estimated.insert({"PENDING", "RETRYABLE"});
        above_cap_.insert(name);
      }
    }
  }

  void read_capped(Query query, const char* column, std::string_view status) {
    for (const auto& row : run(query, rows_per_consumer())) {
      const auto name = row["consumer"].as<std::string>();
      auto& consumer = snapshot_.consumers[name];
      consumer.by_status[std::string(status)] = row[column].as<double>();
      if (row[column].as<double>() > cap()) {
        consumer.estimated.insert(std::string(status));
        above_cap_.insert(name);
      }
    }
  }

  void read_blocked_keys() {
    for (const auto& row : run(kBlockedKeys)) {
      auto& consumer = snapshot_.consumers[row["consumer"].as<std::string>()];
      const double keys = row["blocked_keys"].as<double>();
      const auto kind = row["scope_kind"].as<std::string>();
      const Scope scope = kind == "global" ? Scope::global() : Scope::tenant(row["scope_id"].as<std::string>());
      consumer.blocked_keys += keys;
      consumer.blocked_by_scope[to_string(scope)] += keys;
      consumer.oldest_blocked_age = std::max(consumer.oldest_blocked_age, row["oldest_blocked_age"].as<double>());
    }
  }

  // Above the cap: the statistics' estimate, never below what the capped scan saw.
  void read_estimates() {
    for (const auto& row : run(kEstimates, options_.schema)) {
      if (row["consumer"].is_null() || row["status"].is_null()) continue;
      const auto found = snapshot_.consumers.find(row["consumer"].as<std::string>());
      if (found == snapshot_.consumers.end()) continue;
      const auto status = row["status"].as<std::string>();
      if (!found->second.estimated.contains(status)) continue;
      double& count = found->second.by_status[status];
      count = std::max(count, std::round(row["estimate"].as<double>()));
    }
  }

  nlohmann::json compute_outbox() {
    const auto due = run(kOutboxDue).at(0);
    snapshot_.outbox["PENDING"] = due["pending"].as<double>();
    snapshot_.outbox["RETRYABLE"] = due["retryable"].as<double>();
    const auto publishing = run(kOutboxPublishing).at(0);
    snapshot_.outbox["PUBLISHING"] = publishing["publishing"].as<double>();
    snapshot_.outbox_oldest_age = std::max(due["oldest_age"].as<double>(), publishing["oldest_age"].as<double>());
    snapshot_.outbox["DEAD"] = run(kOutboxDead).at(0)["dead"].as<double>();
    snapshot_.outbox["WAITING"] = run(kOutboxWaiting, rows_per_consumer()).at(0)["waiting"].as<double>();
    return outbox_figures(snapshot_);
  }
};

// A status's count, 0 when none was read.
double count_of(const std::map<std::string, double, std::less<>>& by_status, std::string_view status) {
  const auto found = by_status.find(status);
  return found == by_status.end() ? 0.0 : found->second;
}

// The inbox gauges of every labelled consumer: one missing from the snapshot reports 0.
void export_inbox(Metrics& metrics, const Snapshot& snapshot, const std::set<std::string>& labels) {
  const ConsumerBacklog empty{};
  for (const auto& consumer : labels) {
    const auto found = snapshot.consumers.find(consumer);
    const auto& backlog = found == snapshot.consumers.end() ? empty : found->second;
    for (auto status : kInboxStatuses) {
      metrics.set_inbox_receipts(consumer, status, count_of(backlog.by_status, status));
      metrics.set_inbox_receipts_estimated(consumer, status, backlog.estimated.contains(status));
    }
    metrics.set_inbox_oldest_due_age(consumer, backlog.oldest_due_age);
    metrics.set_inbox_blocked_keys(consumer, backlog.blocked_keys, backlog.oldest_blocked_age);
    metrics.set_inbox_blocked_keys_by_scope(consumer, backlog.blocked_by_scope);
  }
}

// Every gauge a collection sets, from what it read: a section without figures, or a table
// the role may not read, leaves its gauges alone.
void export_gauges(Metrics& metrics, const Snapshot& snapshot, const std::set<std::string>& labels) {
  if (snapshot.inbox_section.known) export_inbox(metrics, snapshot, labels);
  if (snapshot.outbox_section.known) {
    for (auto status : kOutboxStatuses) metrics.set_outbox_events(status, count_of(snapshot.outbox, status));
    metrics.set_outbox_oldest_unpublished_age(snapshot.outbox_oldest_age);
  }
  for (auto table : kTables) {
    const auto found = snapshot.tables.find(table);
    if (found != snapshot.tables.end())
      metrics.set_table_health(std::string(table), found->second.dead_tuples, found->second.size_bytes);
  }
  metrics.set_notify_queue_usage(snapshot.notify_queue_usage);
  metrics.set_xmin_horizon_age(snapshot.xmin_horizon_age);
  const auto& inbox = snapshot.inbox_section;
  const auto& outbox = snapshot.outbox_section;
  if (inbox.known) metrics.backlog_snapshot("inbox", inbox.age, inbox.computed);
  if (outbox.known) metrics.backlog_snapshot("outbox", outbox.age, outbox.computed);
}

}  // namespace

void BacklogCollector::collect_once() {
  std::lock_guard collect(state_->collect_mutex);
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };

  Snapshot snapshot;
  try {
    // Not READ ONLY: the elected process locks and updates its section's row.
    Tx tx = pool_->begin(LoanUse::BoxcarOnly);  // SET LOCAL and its own queries only
    CollectionReads reads(tx, state_->queries, state_->names, options_, snapshot);
    reads.configure_session();
    reads.read_access();
    reads.read_inbox();
    reads.read_outbox();
    reads.read_table_health();
    reads.read_notify_queue();
    reads.read_xmin_horizon();
    tx.commit();
  } catch (...) {
    metrics_->backlog_collected(elapsed(), false);
    // Non-database exceptions (a pqxx conversion error, bad_alloc) propagate unchanged.
    throw detail::to_database_error(std::current_exception(), "collecting the backlog metrics", false);
  }

  // Only now that every figure is read: a failed collection changes no gauge.
  if (snapshot.inbox_section.known) state_->labels.fold(snapshot.consumers);
  export_gauges(*metrics_, snapshot, state_->labels.known());
  metrics_->backlog_collected(elapsed(), true);
}

}  // namespace boxcar
