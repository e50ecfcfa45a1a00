// bench_held_snapshot: does the pipeline keep its throughput and latency while a long
// transaction pins the xmin horizon (docs/design/held-snapshot.md)?
//
//   scripts/bench held-snapshot [--rate R] [--hours H] [--clean-seconds S] [--held-seconds S]
//                               [--recovery-seconds S]
//
// One pipeline runs for the whole run at a steady offered load of R msg/s: 4 producer
// threads call Inbox::accept() on an open-loop schedule (a late call does not move the
// next one), a Worker (8 handler threads, one transaction per message) writes one
// application row and emits one event per message, and a Publisher delivers the events
// to the librdkafka mock cluster in this process. The schedule, each phase after the
// last:
//   clean      nothing held (its first 10 s warm the pipeline up and are not counted);
//   held_1     a session opens a REPEATABLE READ transaction, reads one application row
//              and holds it, idle in transaction, to the phase's end;
//   recovery_1 released: how long until the figures are back to the clean ones;
//   held_4     4 such sessions, started min(60 s, phase / 4) apart, all held to its end;
//   recovery_4 released.
// A 6,000-message burst first measures what the pipeline drains per second and leaves
// rows for the statistics the clean phase plans with; the offered load is 40% of that
// rate (at least 100 msg/s), or --rate: one the machine sustains clean, which the clean
// phase checks (`info clean_keeps_up`). Default lengths: clean 120 s, held
// 240 s, recovery 90 s, about 14 minutes with the burst; --hours H holds each variant H
// hours (clean and recoveries 600 s). Autovacuum runs as the cluster and the migrations
// set it (scripts/lib/postgres.sh: naptime 1 min).
//
// Measured per message: accept-to-handler (from just before accept() to the handler's
// start), the claim statement (WorkerOptions::on_claim: every claim the worker runs,
// empty ones included), commit-to-ack (from the handler's return, which its completion
// and commit follow within a millisecond or two, to the publisher's PUBLISHED mark);
// each second: messages accepted, completed and delivered, the oldest snapshot's xmin
// age; every 5 s: dead tuples, heap and index size, updates and HOT updates of
// inbox_receipts and outbox_events (all partitions).
// The last lines, for each held phase against the clean phase of the same run:
//   ratio held_N_throughput          delivered msg/s held / clean            (>= 0.95)
//   ratio held_N_pickup_p99          accept-to-handler p99 held / clean      (<= 2.00)
//   p99 held_N_pickup_ms             accept-to-handler p99 held, ms          (<= 50)
//   ratio held_N_claim_p99_growth    claim p99, last minute / first minute   (<= 1.50)
//   ratio recovery_N_seconds         seconds from release to clean figures   (<= 60)
// and `info` lines: claim and commit-to-ack p99 against clean, dead tuples at the end of
// the hold, heap and index growth over it, the HOT share of updates.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/core/migrate.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "harness.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using boxcar::bench::fixed;
using Clock = std::chrono::steady_clock;

constexpr const char* kSchema = "bench_held_snapshot";
constexpr const char* kConsumer = "orders.projection.v1";
constexpr const char* kTopic = "orders.projected";
constexpr int kProducers = 4;
constexpr std::size_t kHandlers = 8;
constexpr int kTenants = 100;
constexpr int kCalibrationMessages = 6000;
constexpr double kLoadShare = 0.40;
// The clean phase's first seconds: connections, first parses, the producer's start.
constexpr double kWarmup = 10;
// Windows of the recovery's test and of the time series' percentiles.
constexpr double kWindow = 10;

// The targets (docs/benchmarks.md, "held-snapshot").
constexpr double kThroughputTarget = 0.95;
constexpr double kPickupRatioTarget = 2.0;
constexpr double kPickupMsTarget = 50;
constexpr double kClaimGrowthTarget = 1.5;
constexpr double kRecoveryTarget = 60;

struct Settings {
  std::string url{};
  int rate = 0;  // 0: calibrate
  double clean_seconds = 120;
  double held_seconds = 240;
  double recovery_seconds = 90;
  int readers = 4;
};

enum class Kind { clean, held, recovery };

struct Phase {
  std::string name;
  Kind kind;
  double from = 0, to = 0;    // seconds since the run's start
  int readers = 0;            // held: sessions holding a snapshot
  double reader_spacing = 0;  // held: seconds between their starts
};

std::vector<Phase> schedule(const Settings& s) {
  std::vector<Phase> phases;
  double at = 0;
  const auto add = [&](std::string name, Kind kind, double seconds, int readers = 0) {
    const double spacing = readers > 1 ? std::min(60.0, seconds / readers) : 0;
    phases.push_back({std::move(name), kind, at, at + seconds, readers, spacing});
    at += seconds;
  };
  add("clean", Kind::clean, s.clean_seconds);
  add("held_1", Kind::held, s.held_seconds, 1);
  add("recovery_1", Kind::recovery, s.recovery_seconds);
  add("held_" + std::to_string(s.readers), Kind::held, s.held_seconds, s.readers);
  add("recovery_" + std::to_string(s.readers), Kind::recovery, s.recovery_seconds);
  return phases;
}

std::int64_t micros_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string load_average() {
  std::ifstream in("/proc/loadavg");
  std::string one, five, fifteen;
  in >> one >> five >> fifteen;
  return one + " " + five + " " + fifteen;
}

// An observation at `at` seconds since the run's start.
// Floats: a long run keeps millions of them.
struct Point {
  float at;
  float ms;
};

// The q-quantile of the values observed in [from, to) of `points`, sorted by time.
double percentile(const std::vector<Point>& points, double from, double to, double q, std::size_t* count = nullptr) {
  const auto by_time = [](const Point& p, double t) { return static_cast<double>(p.at) < t; };
  const auto first = std::lower_bound(points.begin(), points.end(), from, by_time);
  const auto last = std::lower_bound(first, points.end(), to, by_time);
  std::vector<double> values;
  values.reserve(static_cast<std::size_t>(last - first));
  for (auto p = first; p != last; ++p) values.push_back(p->ms);
  if (count) *count = values.size();
  if (values.empty()) return 0;
  const auto k = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size()))) - 1;
  const auto nth = values.begin() + static_cast<long>(std::min(k, values.size() - 1));
  std::nth_element(values.begin(), nth, values.end());
  return *nth;
}

// What the handler, the worker's claims and the publisher's marks report, stamped with
// the time since the run's start.
class Recorder {
 public:
  explicit Recorder(Clock::time_point start) : start_(start) {}
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  void pickup(double ms) {
    std::lock_guard lock(mutex_);
    pickups_.push_back({static_cast<float>(now()), static_cast<float>(ms)});
  }
  void claim(double seconds) {
    std::lock_guard lock(mutex_);
    claims_.push_back({static_cast<float>(now()), static_cast<float>(seconds * 1000)});
  }
  void committed(const std::string& event_id) {
    const auto at = Clock::now();
    std::lock_guard lock(mutex_);
    committed_[event_id] = at;
  }
  void delivered(const std::vector<std::string>& event_ids) {
    const auto at = Clock::now();
    const double t = now();
    std::lock_guard lock(mutex_);
    for (const auto& id : event_ids) {
      const auto found = committed_.find(id);
      if (found == committed_.end()) continue;  // the calibration's, or a rolled-back attempt's
      acks_.push_back({static_cast<float>(t),
                       static_cast<float>(std::chrono::duration<double, std::milli>(at - found->second).count())});
      committed_.erase(found);
    }
  }
  // Copies, for the report.
  std::vector<Point> pickups() const {
    std::lock_guard lock(mutex_);
    return pickups_;
  }
  std::vector<Point> claims() const {
    std::lock_guard lock(mutex_);
    return claims_;
  }
  std::vector<Point> acks() const {
    std::lock_guard lock(mutex_);
    return acks_;
  }
  void forget() {
    std::lock_guard lock(mutex_);
    pickups_.clear();
    claims_.clear();
    acks_.clear();
    committed_.clear();
  }

 private:
  Clock::time_point start_;
  mutable std::mutex mutex_;
  std::vector<Point> pickups_, claims_, acks_;
  std::unordered_map<std::string, Clock::time_point> committed_;
};

class ProjectAndEmit final : public boxcar::InboxHandler {
 public:
  ProjectAndEmit(boxcar::OutboxEmitter& outbox, Recorder& recorder)
      : outbox_(outbox),
        recorder_(recorder),
        sql_(std::string("INSERT INTO ") + kSchema + ".app_rows (message_id) VALUES ($1)") {}
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    if (const auto stamp = payload.find("acceptedAtUs"); stamp != payload.end())
      recorder_.pickup(static_cast<double>(micros_now() - stamp->get<std::int64_t>()) / 1000.0);
    context.tx.exec(sql_, context.message_id);
    const auto event =
        outbox_.emit(context.tx,
                     boxcar::OutboxMessage{
                         .event_type = "order.projected", .schema_version = 1, .topic = kTopic, .payload = payload},
                     {.scope = context.scope, .causation_id = context.message_id});
    recorder_.committed(event.event_id);
  }

 private:
  boxcar::OutboxEmitter& outbox_;
  Recorder& recorder_;
  std::string sql_;
};

struct TableStats {
  std::int64_t dead = 0, live = 0, heap_bytes = 0, index_bytes = 0, updates = 0, hot_updates = 0, autovacuums = 0;
};

struct Sample {
  double at = 0;
  std::uint64_t accepted = 0, completed = 0, delivered = 0;
  std::int64_t xmin_age = 0;  // the oldest snapshot's, in transactions
  bool has_tables = false;
  TableStats inbox{}, outbox{};
};

TableStats table_stats(pqxx::nontransaction& n, const std::string& table) {
  // pg_partition_tree lists nothing for a plain table: the table itself, or its partitions.
  const auto row = n.exec_params1(
      "SELECT coalesce(sum(s.n_dead_tup), 0), coalesce(sum(s.n_live_tup), 0), "
      "coalesce(sum(pg_catalog.pg_relation_size(s.relid)), 0), coalesce(sum(pg_catalog.pg_indexes_size(s.relid)), 0), "
      "coalesce(sum(s.n_tup_upd), 0), coalesce(sum(s.n_tup_hot_upd), 0), coalesce(sum(s.autovacuum_count), 0) "
      "FROM pg_catalog.pg_stat_user_tables AS s "
      "WHERE s.relid = $1::regclass "
      "OR s.relid IN (SELECT relid FROM pg_catalog.pg_partition_tree($1::regclass) WHERE isleaf)",
      std::string(kSchema) + "." + table);
  return {row[0].as<std::int64_t>(), row[1].as<std::int64_t>(), row[2].as<std::int64_t>(), row[3].as<std::int64_t>(),
          row[4].as<std::int64_t>(), row[5].as<std::int64_t>(), row[6].as<std::int64_t>()};
}

std::int64_t oldest_xmin_age(pqxx::nontransaction& n) {
  return n
      .exec1(
          "SELECT coalesce(max(pg_catalog.age(backend_xmin)), 0) FROM pg_catalog.pg_stat_activity "
          "WHERE datname = pg_catalog.current_database()")[0]
      .as<std::int64_t>();
}

// A session that pins the horizon: REPEATABLE READ, one row read, then idle in
// transaction until released.
class SnapshotHolder {
 public:
  explicit SnapshotHolder(const std::string& url) : connection_(url) {
    pqxx::nontransaction n(connection_);
    n.exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
    n.exec(std::string("SELECT message_id FROM ") + kSchema + ".app_rows LIMIT 1");
    pid_ = n.exec1("SELECT pg_catalog.pg_backend_pid()")[0].as<int>();
  }
  ~SnapshotHolder() {
    try {
      pqxx::nontransaction(connection_).exec("COMMIT");
    } catch (const std::exception&) {
      // The connection goes with it: the server ends the transaction either way.
    }
  }
  int pid() const { return pid_; }

 private:
  pqxx::connection connection_;
  int pid_ = 0;
};

struct Pipeline {
  std::shared_ptr<boxcar::ConnectionPool> pool;
  std::unique_ptr<boxcar::Inbox> inbox;
  std::unique_ptr<boxcar::OutboxEmitter> outbox;
  std::unique_ptr<boxcar::Worker> worker;
  std::unique_ptr<boxcar::Publisher> publisher;

  Pipeline(const std::string& url, const std::string& bootstrap, Recorder& recorder) {
    pool = boxcar::ConnectionPool::create({.url = url, .size = kProducers + kHandlers + 6});
    inbox = std::make_unique<boxcar::Inbox>(pool, boxcar::InboxOptions{.schema = kSchema, .consumers = {kConsumer}});
    outbox = std::make_unique<boxcar::OutboxEmitter>(pool, boxcar::OutboxOptions{.schema = kSchema});
    worker = std::make_unique<boxcar::Worker>(
        pool,
        boxcar::WorkerOptions{
            .schema = kSchema,
            .consumers = {kConsumer},
            .concurrency = kHandlers,
            .lease = 60s,
            .handler_timeout = 30s,
            .on_claim = [&recorder](const std::string&, std::size_t, double seconds) { recorder.claim(seconds); }},
        std::vector<boxcar::HandlerRegistration>{{.consumer = kConsumer,
                                                  .supports = {{"order.created", 1}},
                                                  .handler = std::make_shared<ProjectAndEmit>(*outbox, recorder)}});
    publisher = std::make_unique<boxcar::Publisher>(
        pool, boxcar::PublisherOptions{
                  .schema = kSchema,
                  .kafka = {{"bootstrap.servers", bootstrap}},
                  .on_delivered = [&recorder](const std::vector<std::string>& ids) { recorder.delivered(ids); }});
    worker->start();
    publisher->start();
  }
  ~Pipeline() {
    worker->stop();
    publisher->stop();
  }
};

boxcar::AcceptRequest request(std::uint64_t k, bool stamped) {
  nlohmann::json payload = {{"orderId", "o-" + std::to_string(k)}, {"note", std::string(200, 'x')}};
  if (stamped) payload["acceptedAtUs"] = micros_now();
  return {.scope = boxcar::Scope::tenant("tenant-" + std::to_string(k % kTenants)),
          .source = "orders-service",
          .consumer = kConsumer,
          .message_id = "m-" + std::to_string(k),
          .event_type = "order.created",
          .schema_version = 1,
          .payload = std::move(payload)};
}

// Messages the pipeline carries end to end per second with a backlog to work on: a burst
// accepted in batches of 500, timed until the publisher has delivered the last of it.
double calibrate(Pipeline& p) {
  std::vector<boxcar::AcceptRequest> burst;
  for (int i = 0; i < kCalibrationMessages; ++i)
    burst.push_back(request(static_cast<std::uint64_t>(1'000'000'000 + i), false));
  const auto before = p.publisher->stats().delivered;
  const auto start = Clock::now();
  for (std::size_t first = 0; first < burst.size(); first += 500)
    for (const auto& r :
         p.inbox->accept_many(std::span(burst).subspan(first, std::min<std::size_t>(500, burst.size() - first))))
      r.rethrow_if_error();
  const auto deadline = start + 300s;
  while (p.publisher->stats().delivered < before + kCalibrationMessages) {
    if (Clock::now() > deadline) throw std::runtime_error("the calibration burst was not delivered within 300 s");
    std::this_thread::sleep_for(10ms);
  }
  return kCalibrationMessages / boxcar::bench::since(start);
}

struct PhaseFigures {
  double delivered_per_s = 0;
  double pickup_p50 = 0, pickup_p99 = 0, claim_p50 = 0, claim_p99 = 0, ack_p50 = 0, ack_p99 = 0;
  std::size_t claims = 0;
  std::uint64_t backlog_end = 0;
  TableStats inbox_first{}, inbox_last{}, outbox_first{}, outbox_last{};
  std::int64_t inbox_dead_max = 0, outbox_dead_max = 0, xmin_age_max = 0;
};

class Report {
 public:
  Report(const Settings& s, std::vector<Phase> phases, std::vector<Sample> samples, std::vector<Point> pickups,
         std::vector<Point> claims, std::vector<Point> acks)
      : s_(s),
        phases_(std::move(phases)),
        samples_(std::move(samples)),
        pickups_(by_time(std::move(pickups))),
        claims_(by_time(std::move(claims))),
        acks_(by_time(std::move(acks))) {}

  // The first sample at or after `at` (the last one when none).
  const Sample& sample_at(double at) const {
    for (const auto& x : samples_)
      if (x.at >= at) return x;
    return samples_.back();
  }
  double counted_from(const Phase& p) const { return p.kind == Kind::clean ? p.from + kWarmup : p.from; }

  PhaseFigures figures(const Phase& p) const {
    PhaseFigures f;
    const double from = counted_from(p), to = p.to;
    const auto& a = sample_at(from);
    const auto& b = sample_at(to - 0.5);
    f.delivered_per_s = b.at > a.at ? static_cast<double>(b.delivered - a.delivered) / (b.at - a.at) : 0;
    f.pickup_p50 = percentile(pickups_, from, to, 0.50);
    f.pickup_p99 = percentile(pickups_, from, to, 0.99);
    f.claim_p50 = percentile(claims_, from, to, 0.50, &f.claims);
    f.claim_p99 = percentile(claims_, from, to, 0.99);
    f.ack_p50 = percentile(acks_, from, to, 0.50);
    f.ack_p99 = percentile(acks_, from, to, 0.99);
    f.backlog_end = b.accepted - std::min(b.accepted, b.delivered);
    bool first = true;
    for (const auto& x : samples_) {
      if (x.at < from || x.at >= to || !x.has_tables) continue;
      if (first) {
        f.inbox_first = x.inbox;
        f.outbox_first = x.outbox;
        first = false;
      }
      f.inbox_last = x.inbox;
      f.outbox_last = x.outbox;
      f.inbox_dead_max = std::max(f.inbox_dead_max, x.inbox.dead);
      f.outbox_dead_max = std::max(f.outbox_dead_max, x.outbox.dead);
    }
    for (const auto& x : samples_)
      if (x.at >= from && x.at < to) f.xmin_age_max = std::max(f.xmin_age_max, x.xmin_age);
    return f;
  }

  // What "the clean figures" are for the recovery: the median over the clean phase's 10 s
  // windows of each latency's p99, and the median backlog of its samples. Medians: on a
  // shared machine a clean window or two can be slow for reasons of their own.
  struct Normal {
    double pickup = 0, claim = 0, ack = 0;
    double backlog = 0;
  };
  Normal normal() const {
    const Phase& clean = phases_.front();
    std::vector<double> pickup, claim, ack, backlog;
    for (double at = counted_from(clean); at + kWindow <= clean.to + 0.5; at += kWindow) {
      pickup.push_back(percentile(pickups_, at, at + kWindow, 0.99));
      claim.push_back(percentile(claims_, at, at + kWindow, 0.99));
      ack.push_back(percentile(acks_, at, at + kWindow, 0.99));
    }
    for (const auto& x : samples_)
      if (x.at >= counted_from(clean) && x.at < clean.to)
        backlog.push_back(static_cast<double>(x.accepted - std::min(x.accepted, x.delivered)));
    return {.pickup = boxcar::bench::median(pickup),
            .claim = boxcar::bench::median(claim),
            .ack = boxcar::bench::median(ack),
            .backlog = boxcar::bench::median(backlog)};
  }
  // A 10 s window from `at` whose p99s are within 1.5x of the clean ones and whose backlog
  // never exceeds 1.5x the clean one plus 20 messages.
  bool window_normal(const Normal& n, double at) const {
    const auto within = [](double value, double bound) { return value <= 1.5 * bound; };
    if (!within(percentile(pickups_, at, at + kWindow, 0.99), n.pickup)) return false;
    if (!within(percentile(claims_, at, at + kWindow, 0.99), n.claim)) return false;
    if (!within(percentile(acks_, at, at + kWindow, 0.99), n.ack)) return false;
    for (const auto& x : samples_)
      if (x.at >= at &&
          x.at<at + kWindow&& static_cast<double>(x.accepted - std::min(x.accepted, x.delivered))> 1.5 * n.backlog + 20)
        return false;
    return true;
  }
  // Seconds from the release to the first second from which two windows in a row are
  // normal; the phase's length when it never got there (the target's line says so).
  double recovery_seconds(const Phase& p, bool* recovered) const {
    const Normal n = normal();
    for (double at = p.from; at + 2 * kWindow <= p.to; at += 1) {
      if (window_normal(n, at) && window_normal(n, at + kWindow)) {
        *recovered = true;
        return at - p.from;
      }
    }
    *recovered = false;
    return p.to - p.from;
  }

  void print(std::ostream& out) const {
    print_phases(out);
    print_series(out);
    print_minutes(out);
    print_lines(out);
  }

 private:
  // Recorded by several threads, each stamped before it took the recorder's lock.
  static std::vector<Point> by_time(std::vector<Point> points) {
    std::stable_sort(points.begin(), points.end(), [](const Point& a, const Point& b) { return a.at < b.at; });
    return points;
  }
  static std::string mb(std::int64_t bytes) { return fixed(static_cast<double>(bytes) / 1e6, 1); }
  static double hot_share(const TableStats& first, const TableStats& last) {
    const auto updates = last.updates - first.updates;
    return updates > 0 ? static_cast<double>(last.hot_updates - first.hot_updates) / static_cast<double>(updates) : 0;
  }

  void print_phases(std::ostream& out) const {
    out << "\nphase         seconds  delivered/s  pickup p50/p99 ms  claim p50/p99 ms (claims)  ack p50/p99 ms  "
           "backlog  xmin age  inbox dead  outbox dead\n";
    for (const auto& p : phases_) {
      const auto f = figures(p);
      out << std::left << std::setw(12) << p.name << std::right << std::setw(9) << fixed(p.to - counted_from(p), 0)
          << std::setw(13) << fixed(f.delivered_per_s, 0) << std::setw(10) << fixed(f.pickup_p50, 1) << " /"
          << std::setw(6) << fixed(f.pickup_p99, 1) << std::setw(10) << fixed(f.claim_p50, 2) << " /" << std::setw(7)
          << fixed(f.claim_p99, 2) << " (" << f.claims << ")" << std::setw(9) << fixed(f.ack_p50, 1) << " /"
          << std::setw(6) << fixed(f.ack_p99, 1) << std::setw(9) << f.backlog_end << std::setw(10) << f.xmin_age_max
          << std::setw(12) << f.inbox_dead_max << std::setw(13) << f.outbox_dead_max << "\n";
    }
    out << "\nphase         inbox heap/index MB (start -> end)   outbox heap/index MB (start -> end)   HOT share of "
           "updates inbox/outbox   autovacuums inbox/outbox\n";
    for (const auto& p : phases_) {
      const auto f = figures(p);
      out << std::left << std::setw(12) << p.name << std::right << "  " << mb(f.inbox_first.heap_bytes) << "/"
          << mb(f.inbox_first.index_bytes) << " -> " << mb(f.inbox_last.heap_bytes) << "/"
          << mb(f.inbox_last.index_bytes) << "      " << mb(f.outbox_first.heap_bytes) << "/"
          << mb(f.outbox_first.index_bytes) << " -> " << mb(f.outbox_last.heap_bytes) << "/"
          << mb(f.outbox_last.index_bytes) << "      " << fixed(hot_share(f.inbox_first, f.inbox_last), 3) << " / "
          << fixed(hot_share(f.outbox_first, f.outbox_last), 3) << "      "
          << (f.inbox_last.autovacuums - f.inbox_first.autovacuums) << " / "
          << (f.outbox_last.autovacuums - f.outbox_first.autovacuums) << "\n";
    }
  }

  // One row per step (10 s in the default run, about 120 rows in a long one): p99s over the
  // step, the counters and table figures at its end.
  void print_series(std::ostream& out) const {
    const double total = phases_.back().to;
    const double step = std::max(kWindow, std::round(total / 120 / kWindow) * kWindow);
    out << "\ntime series, every " << fixed(step, 0)
        << " s (p99 over the step; counters and tables at its end)\n"
           "    t  phase        delivered/s  backlog  pickup_p99  claim_p99  claims/s  ack_p99  xmin_age  "
           "inbox_dead  inbox_heap_MB  inbox_idx_MB  outbox_dead  outbox_heap_MB  outbox_idx_MB\n";
    for (double at = 0; at + step <= total + 0.5; at += step) {
      const auto& a = sample_at(at);
      const auto& b = sample_at(at + step - 0.5);
      const Sample* tables = nullptr;
      for (const auto& x : samples_)
        if (x.has_tables && x.at <= at + step) tables = &x;
      std::string phase;
      for (const auto& p : phases_)
        if (at >= p.from && at < p.to) phase = p.name;
      std::size_t claims = 0;
      const double claim_p99 = percentile(claims_, at, at + step, 0.99, &claims);
      out << std::setw(5) << fixed(at + step, 0) << "  " << std::left << std::setw(11) << phase << std::right
          << std::setw(13) << fixed(b.at > a.at ? static_cast<double>(b.delivered - a.delivered) / (b.at - a.at) : 0, 0)
          << std::setw(9) << (b.accepted - std::min(b.accepted, b.delivered)) << std::setw(12)
          << fixed(percentile(pickups_, at, at + step, 0.99), 1) << std::setw(11) << fixed(claim_p99, 2)
          << std::setw(10) << fixed(static_cast<double>(claims) / step, 0) << std::setw(9)
          << fixed(percentile(acks_, at, at + step, 0.99), 1) << std::setw(10) << b.xmin_age;
      if (tables)
        out << std::setw(12) << tables->inbox.dead << std::setw(15) << mb(tables->inbox.heap_bytes) << std::setw(14)
            << mb(tables->inbox.index_bytes) << std::setw(13) << tables->outbox.dead << std::setw(16)
            << mb(tables->outbox.heap_bytes) << std::setw(15) << mb(tables->outbox.index_bytes);
      out << "\n";
    }
  }

  // The claim p99 of each minute of each held phase (the growth target's figures).
  void print_minutes(std::ostream& out) const {
    for (const auto& p : phases_) {
      if (p.kind != Kind::held) continue;
      out << "\n"
          << p.name << ", claim and accept-to-handler p99 per minute (" << p.readers
          << " session(s) holding a snapshot";
      if (p.readers > 1) out << ", started " << fixed(p.reader_spacing, 0) << " s apart";
      out << "):";
      for (double at = p.from; at + 60 <= p.to + 0.5; at += 60) {
        std::size_t n = 0;
        const double claim = percentile(claims_, at, at + 60, 0.99, &n);
        out << "\n  minute " << static_cast<int>((at - p.from) / 60) + 1 << ": claim p99 " << fixed(claim, 2) << " ms ("
            << n << " claims), pickup p99 " << fixed(percentile(pickups_, at, at + 60, 0.99), 1) << " ms";
      }
      out << "\n";
    }
  }

  void print_lines(std::ostream& out) const {
    const auto clean = figures(phases_.front());
    out << "\n";
    const auto ratio = [&](const std::string& name, double value, double target) {
      out << "ratio " << name << " " << fixed(value, 2) << " " << fixed(target, 2) << "\n";
    };
    const auto info = [&](const std::string& name, double value) {
      out << "info " << name << " " << fixed(value, 2) << "\n";
    };
    const auto over = [](double a, double b) { return b > 0 ? a / b : 0; };
    info("clean_keeps_up", over(clean.delivered_per_s, s_.rate));
    info("clean_hot_share_inbox", hot_share(clean.inbox_first, clean.inbox_last));
    info("clean_hot_share_outbox", hot_share(clean.outbox_first, clean.outbox_last));
    for (std::size_t i = 0; i < phases_.size(); ++i) {
      const Phase& p = phases_[i];
      if (p.kind == Kind::held) {
        const auto f = figures(p);
        ratio(p.name + "_throughput", over(f.delivered_per_s, clean.delivered_per_s), kThroughputTarget);
        ratio(p.name + "_pickup_p99", over(f.pickup_p99, clean.pickup_p99), kPickupRatioTarget);
        out << "p99 " << p.name << "_pickup_ms " << fixed(f.pickup_p99, 2) << " " << fixed(kPickupMsTarget, 2) << "\n";
        const double first = percentile(claims_, p.from, p.from + 60, 0.99);
        const double last = percentile(claims_, p.to - 60, p.to, 0.99);
        ratio(p.name + "_claim_p99_growth", over(last, first), kClaimGrowthTarget);
        info(p.name + "_claim_p99", over(f.claim_p99, clean.claim_p99));
        info(p.name + "_ack_p99", over(f.ack_p99, clean.ack_p99));
        info(p.name + "_inbox_dead_tuples_end", static_cast<double>(f.inbox_last.dead));
        info(p.name + "_outbox_dead_tuples_end", static_cast<double>(f.outbox_last.dead));
        info(p.name + "_inbox_heap_growth",
             over(static_cast<double>(f.inbox_last.heap_bytes), static_cast<double>(f.inbox_first.heap_bytes)));
        info(p.name + "_inbox_index_growth",
             over(static_cast<double>(f.inbox_last.index_bytes), static_cast<double>(f.inbox_first.index_bytes)));
        info(p.name + "_outbox_heap_growth",
             over(static_cast<double>(f.outbox_last.heap_bytes), static_cast<double>(f.outbox_first.heap_bytes)));
        info(p.name + "_outbox_index_growth",
             over(static_cast<double>(f.outbox_last.index_bytes), static_cast<double>(f.outbox_first.index_bytes)));
      } else if (p.kind == Kind::recovery) {
        bool recovered = false;
        const double seconds = recovery_seconds(p, &recovered);
        ratio(p.name + "_seconds", seconds, kRecoveryTarget);
        if (!recovered)
          out << "# " << p.name << ": not back to the clean figures within the phase's " << fixed(seconds, 0) << " s\n";
      }
    }
  }

  const Settings& s_;
  std::vector<Phase> phases_;
  std::vector<Sample> samples_;
  std::vector<Point> pickups_, claims_, acks_;
};

void reset_schema(const std::string& url) {
  Admin admin(url);
  admin.exec(std::string("DROP SCHEMA IF EXISTS ") + kSchema + " CASCADE");
  boxcar::migrate(url, {.schema = kSchema});
  admin.exec(std::string("CREATE TABLE ") + kSchema + ".app_rows (message_id text NOT NULL)");
}

double parse_seconds(const std::string& flag, const std::string& text, double at_least) {
  try {
    std::size_t used = 0;
    const double value = std::stod(text, &used);
    if (used == text.size() && value >= at_least) return value;
  } catch (const std::exception&) {
  }
  throw boxcar::bench::UsageError(flag + " needs a number of at least " + fixed(at_least, 0) + ", got '" + text + "'");
}

Settings parse(int argc, char** argv) {
  Settings s;
  double hours = 0;
  bool lengths_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") throw boxcar::bench::UsageError("");
    if (i + 1 >= argc) throw boxcar::bench::UsageError(flag + ": missing value (or unknown flag)");
    const std::string value = argv[++i];
    if (flag == "--database-url") {
      s.url = value;
    } else if (flag == "--rate") {
      s.rate = static_cast<int>(parse_seconds(flag, value, 10));
    } else if (flag == "--hours") {
      hours = parse_seconds(flag, value, 0);
      if (hours <= 0) throw boxcar::bench::UsageError("--hours needs a positive number");
    } else if (flag == "--clean-seconds") {
      s.clean_seconds = parse_seconds(flag, value, 2 * kWindow + kWarmup);
      lengths_given = true;
    } else if (flag == "--held-seconds") {
      s.held_seconds = parse_seconds(flag, value, 60);
      lengths_given = true;
    } else if (flag == "--recovery-seconds") {
      s.recovery_seconds = parse_seconds(flag, value, 2 * kWindow);
      lengths_given = true;
    } else {
      throw boxcar::bench::UsageError("unknown flag " + flag);
    }
  }
  if (s.url.empty()) throw boxcar::bench::UsageError("--database-url is required");
  if (hours > 0) {
    if (lengths_given) throw boxcar::bench::UsageError("--hours sets the lengths: give it without --*-seconds");
    s.clean_seconds = 600;
    s.held_seconds = hours * 3600;
    s.recovery_seconds = 600;
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Settings s = parse(argc, argv);
    // The worker's and publisher's start and stop lines would bury the figures.
    spdlog::set_level(spdlog::level::warn);
    reset_schema(s.url);
    boxcar::testing::MockKafka kafka(1);
    kafka.create_topic(kTopic, 4);
    const auto run_start = Clock::now();
    Recorder recorder(run_start);
    Pipeline pipeline(s.url, kafka.bootstrap_servers(), recorder);
    std::cout << "bench_held_snapshot: load average " << load_average() << " at the start" << std::endl;
    // The burst runs with --rate too: the VACUUM ANALYZE below must see rows. Statistics
    // of empty tables plan the claims and the by-id locks as if they stayed empty, and
    // until the first autoanalyze (about a minute in) a fair claim read up to 39,000
    // buffers with nothing held, against about 30 on tables analyzed with rows.
    const double capacity = calibrate(pipeline);
    const bool calibrated = s.rate == 0;
    if (calibrated) s.rate = std::max(100, static_cast<int>(capacity * kLoadShare / 50) * 50);
    std::cout << "calibration: the pipeline carried " << fixed(capacity, 0) << " msg/s end to end from a "
              << kCalibrationMessages << "-message burst; offered load " << s.rate << " msg/s ("
              << (calibrated ? fixed(kLoadShare * 100, 0) + "%" : fixed(100.0 * s.rate / capacity, 0) + "%, --rate")
              << ")" << std::endl;
    {
      Admin admin(s.url);
      admin.exec(std::string("VACUUM ANALYZE ") + kSchema + ".inbox_receipts, " + kSchema + ".outbox_events, " +
                 kSchema + ".app_rows");
      admin.checkpoint();
    }
    const auto phases = schedule(s);
    std::cout << "offered load " << s.rate << " msg/s (" << kProducers << " producers, accept() per message, "
              << kTenants << " tenants), worker " << kHandlers
              << " threads (one app row and one emit per message), publisher to the mock cluster; phases:";
    for (const auto& p : phases) std::cout << " " << p.name << " " << fixed(p.to - p.from, 0) << " s";
    std::cout << std::endl;

    // The run's clock starts here: the calibration's observations are dropped.
    recorder.forget();
    const auto t0 = Clock::now();
    const double offset = std::chrono::duration<double>(t0 - run_start).count();
    const std::uint64_t completed_before = pipeline.worker->stats().completed;
    const std::uint64_t delivered_before = pipeline.publisher->stats().delivered;
    const auto at = [&](double seconds) {
      return t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    };
    const double total = phases.back().to;
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> next{0}, accepted{0};
    std::exception_ptr error;
    std::mutex error_mutex;
    std::vector<std::thread> producers;
    for (int t = 0; t < kProducers; ++t)
      producers.emplace_back([&] {
        try {
          for (;;) {
            const std::uint64_t k = next++;
            const double due = static_cast<double>(k) / s.rate;
            if (due >= total || stop) break;
            std::this_thread::sleep_until(at(due));
            pipeline.inbox->accept(request(k, true));
            ++accepted;
          }
        } catch (...) {
          std::lock_guard lock(error_mutex);
          if (!error) error = std::current_exception();
          stop = true;
        }
      });

    std::vector<Sample> samples;
    std::vector<std::unique_ptr<SnapshotHolder>> holders;
    pqxx::connection monitor(s.url);
    std::size_t tick = 0;
    for (const auto& p : phases) {
      std::cout << "[" << fixed(p.from, 0) << " s] " << p.name << std::endl;
      int started = 0;
      while (!stop && Clock::now() < at(p.to)) {
        // The held phase's sessions, each at its start.
        while (p.kind == Kind::held && started < p.readers && Clock::now() >= at(p.from + started * p.reader_spacing)) {
          holders.push_back(std::make_unique<SnapshotHolder>(s.url));
          std::cout << "  [" << fixed(boxcar::bench::since(t0), 0) << " s] session " << holders.back()->pid()
                    << " holds a REPEATABLE READ snapshot" << std::endl;
          ++started;
        }
        std::this_thread::sleep_until(at(static_cast<double>(++tick)));
        Sample x{.at = boxcar::bench::since(t0),
                 .accepted = accepted,
                 .completed = pipeline.worker->stats().completed - completed_before,
                 .delivered = pipeline.publisher->stats().delivered - delivered_before};
        pqxx::nontransaction n(monitor);
        x.xmin_age = oldest_xmin_age(n);
        if (tick % 5 == 0) {
          x.has_tables = true;
          x.inbox = table_stats(n, "inbox_receipts");
          x.outbox = table_stats(n, "outbox_events");
        }
        samples.push_back(x);
      }
      if (p.kind == Kind::held) {
        holders.clear();
        std::cout << "  [" << fixed(boxcar::bench::since(t0), 0) << " s] released" << std::endl;
      }
    }
    stop = true;
    for (auto& t : producers) t.join();
    if (error) std::rethrow_exception(error);
    std::cout << "bench_held_snapshot: load average " << load_average() << " at the end" << std::endl;

    // Observations on the run's clock.
    const auto shifted = [&](std::vector<Point> points) {
      for (auto& p : points) p.at -= static_cast<float>(offset);
      return points;
    };
    Report report(s, phases, std::move(samples), shifted(recorder.pickups()), shifted(recorder.claims()),
                  shifted(recorder.acks()));
    report.print(std::cout);
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << "bench_held_snapshot: " << e.what()
              << "\nusage: bench_held_snapshot --database-url URL [--rate R] [--hours H | --clean-seconds S "
                 "--held-seconds S --recovery-seconds S]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_held_snapshot: " << e.what() << "\n";
    return 1;
  }
}
