// bench_retention: do bounded batch deletes (boxcar::purge, the janitor's inbox part) keep up
// with a sustained accept rate, without growing dead tuples or the time a message waits to
// be picked up?
//
//   scripts/bench retention [--rate R] [--seconds S] [--rounds N] [--backlog-seconds B]
//                           [--vacuum-cost-delay MS]
//
// Each round runs two phases on the same cluster, in alternation, from the same start:
//   kept    R msg/s accepted (accept_many of 50, 4 threads, paced) and drained by a Worker
//           (batch 32, 8 threads, one application row per message); nothing is deleted;
//   purged  the same, with purge() (inbox retention 1 h, batches of 1,000) every second.
// Before each phase the table is refilled with COMPLETED receipts whose completed_at make
// them pass the 1 h retention at R rows/s during the phase (so the purge must delete R
// rows/s to keep up, as it would at steady state), after B seconds' worth of rows already
// past retention (the backlog a janitor finds after a pause: catch-up headroom). The
// table holds R x (B + S + 60) rows at the start, not R x retention: the figures are the
// delete path's cost, not a 1 h table's vacuum cost (docs/benchmarks.md).
//
// Each second a monitor samples the counts and pg_stat_user_tables (n_dead_tup, sizes);
// the cluster's autovacuum settings are left as they are (scripts/lib/postgres.sh: the
// PostgreSQL defaults, naptime 1 min, cost delay 2 ms; inbox_receipts has scale factor
// 0.02 and, since migration 0020, cost delay 0); --vacuum-cost-delay sets the table's
// autovacuum_vacuum_cost_delay (2 measures the table as it was before 0020).
// The last lines are `ratio CASE VALUE TARGET`:
//   retention_drain      completed msg/s purged / kept                      (target 0.95)
//   retention_pickup_p99 pickup p99 kept / purged (accept -> handler start), after the first
//                        min(30 s, S/3) of each phase (the backlog's catch-up)   (target 0.90)
//   retention_keeps_up   rows deleted / (deleted + rows past retention when the purge
//                        stops, with the producers)                           (target 0.98)
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/core/migrate.hpp"
#include "boxcar/core/uuid.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/ops/retention.hpp"
#include "harness.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using Clock = std::chrono::steady_clock;
using boxcar::bench::fixed;
using boxcar::bench::since;

constexpr const char* kKept = "bench_retention_kept";
constexpr const char* kPurged = "bench_retention_purged";
constexpr const char* kConsumer = "orders.projection.v1";
constexpr int kProducers = 4;
constexpr int kAcceptBatch = 50;
constexpr std::size_t kWorkerThreads = 8;
constexpr std::size_t kPurgeBatch = 1000;
constexpr auto kPurgeInterval = 1s;
// The retention of the phases, and how far before the run the prefilled rows completed.
constexpr auto kRetention = std::chrono::hours(1);

struct Settings {
  int rate = 5000;
  int seconds = 120;
  int backlog_seconds = 20;
  int rounds = 1;
  // < 0: the table's autovacuum cost delay as migrated (0 since migration 0020);
  // otherwise set on inbox_receipts of both schemas (0: unthrottled vacuum).
  int vacuum_cost_delay_ms = -1;
  std::string url{};
};

std::int64_t micros_now() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Empties the schema, then fills it with R x (B + S + 60) COMPLETED receipts: the first
// R x B completed before the retention boundary (a backlog), the rest completing one every
// 1/R s from the boundary on, so they pass retention at R rows/s during the phase.
void prefill(const Settings& s, const char* schema) {
  Admin admin(s.url);
  const std::string q = schema;
  admin.exec("TRUNCATE " + q + ".inbox_receipts, " + q + ".app_rows");
  const long long backlog = static_cast<long long>(s.rate) * s.backlog_seconds;
  // 60 s of slack: the rows that age while this prefill, its VACUUM and CHECKPOINT run join
  // the backlog (measured at the phase's start), and the phase never runs out of aging rows.
  const long long total = static_cast<long long>(s.rate) * (s.backlog_seconds + s.seconds + 60);
  admin.exec("INSERT INTO " + q +
             ".inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, "
             "payload, metadata, fingerprint, status, attempts, finished_attempts, available_at, created_at, "
             "updated_at, completed_at) "
             "SELECT 'tenant', 'tenant-' || (g % 997), 'orders-service', '" +
             kConsumer +
             "', 'prefill-' || g, 'order.created', 1, "
             "jsonb_build_object('orderId', 'o-' || g, 'note', repeat('x', 300)), '{}'::jsonb, md5(g::text) || "
             "md5((g + 1)::text), 'COMPLETED', 1, 1, t.at, t.at, t.at, t.at "
             "FROM generate_series(0, " +
             std::to_string(total - 1) + ") AS g CROSS JOIN LATERAL (SELECT now() - interval '1 hour' + ((g - " +
             std::to_string(backlog) + ") * interval '1 second' / " + std::to_string(s.rate) + ") AS at) AS t");
  admin.exec("VACUUM ANALYZE " + q + ".inbox_receipts");
  admin.checkpoint();
}

struct Sample {
  double at = 0;
  std::uint64_t accepted = 0;
  std::uint64_t completed = 0;
  std::int64_t purged = 0;
  std::int64_t dead_tuples = 0;
  std::int64_t live_tuples = 0;
  std::int64_t table_bytes = 0;
  std::int64_t index_bytes = 0;
  std::int64_t autovacuums = 0;
};

struct PhaseResult {
  std::string schema;
  double seconds = 0;
  std::uint64_t accepted = 0;
  std::uint64_t completed = 0;
  std::int64_t purged = 0;
  std::int64_t backlog_at_start = 0;
  std::int64_t left_past_retention = 0;
  double catch_up_seconds = -1;  // when the prefilled backlog was gone (purged phase)
  // (seconds since the phase's start, ms from accept to handler start) per message
  std::vector<std::pair<double, double>> pickups{};
  std::vector<Sample> samples{};

  // Over the messages picked up from `from` seconds on.
  double percentile(double p, double from = 0) const {
    std::vector<double> sorted;
    for (const auto& [at, ms] : pickups)
      if (at >= from) sorted.push_back(ms);
    if (sorted.empty()) return 0;
    std::sort(sorted.begin(), sorted.end());
    return sorted[static_cast<std::size_t>(p * static_cast<double>(sorted.size() - 1))];
  }
  std::int64_t max_dead() const {
    std::int64_t m = 0;
    for (const auto& x : samples) m = std::max(m, x.dead_tuples);
    return m;
  }
  // Least-squares slope of n_dead_tup (rows/s) over the phase's second half.
  double dead_slope() const {
    std::vector<const Sample*> half;
    for (const auto& x : samples)
      if (x.at >= seconds / 2) half.push_back(&x);
    if (half.size() < 2) return 0;
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (const auto* x : half) {
      sx += x->at;
      sy += static_cast<double>(x->dead_tuples);
      sxx += x->at * x->at;
      sxy += x->at * static_cast<double>(x->dead_tuples);
    }
    const double n = static_cast<double>(half.size());
    const double denominator = n * sxx - sx * sx;
    return denominator == 0 ? 0 : (n * sxy - sx * sy) / denominator;
  }
};

class RecordPickup final : public boxcar::InboxHandler {
 public:
  RecordPickup(const std::string& schema, Clock::time_point start, std::vector<std::pair<double, double>>& pickups,
               std::mutex& mutex)
      : sql_("INSERT INTO " + schema + ".app_rows (message_id) VALUES ($1)"),
        start_(start),
        pickups_(pickups),
        mutex_(mutex) {}
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    const double waited_ms = static_cast<double>(micros_now() - payload.at("acceptedAt").get<std::int64_t>()) / 1000.0;
    context.tx.exec(sql_, context.message_id);
    std::lock_guard lock(mutex_);
    pickups_.emplace_back(since(start_), waited_ms);
  }

 private:
  std::string sql_;
  Clock::time_point start_;
  std::vector<std::pair<double, double>>& pickups_;
  std::mutex& mutex_;
};

Sample sample(pqxx::connection& c, const char* schema, double at, std::uint64_t accepted, std::uint64_t completed,
              std::int64_t purged) {
  pqxx::nontransaction n(c);
  const auto row = n.exec_params1(
      "SELECT n_dead_tup, n_live_tup, pg_relation_size(relid), pg_indexes_size(relid), autovacuum_count "
      "FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'inbox_receipts'",
      std::string(schema));
  return {.at = at,
          .accepted = accepted,
          .completed = completed,
          .purged = purged,
          .dead_tuples = row[0].as<std::int64_t>(),
          .live_tuples = row[1].as<std::int64_t>(),
          .table_bytes = row[2].as<std::int64_t>(),
          .index_bytes = row[3].as<std::int64_t>(),
          .autovacuums = row[4].as<std::int64_t>()};
}

PhaseResult run_phase(const Settings& s, const char* schema, bool purge) {
  prefill(s, schema);
  PhaseResult result{.schema = schema};
  std::mutex pickup_mutex;
  const auto start = Clock::now();
  auto pool = boxcar::ConnectionPool::create({.url = s.url, .size = kProducers + kWorkerThreads + 4});
  boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {kConsumer}});
  boxcar::Worker worker(pool,
                        {.schema = schema,
                         .consumers = {kConsumer},
                         .concurrency = kWorkerThreads,
                         .batch_size = 32,
                         .claim_limit = 32,
                         .lease = 60s,
                         .handler_timeout = 30s,
                         .poll_interval = 100ms},
                        {{.consumer = kConsumer,
                          .supports = {{"order.created", 1}},
                          .handler = std::make_shared<RecordPickup>(schema, start, result.pickups, pickup_mutex)}});
  worker.start();

  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> accepted{0};
  std::atomic<std::int64_t> purged{0};
  const auto end = start + std::chrono::seconds(s.seconds);
  const double per_producer = static_cast<double>(s.rate) / kProducers;

  std::vector<std::thread> threads;
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto guarded = [&](auto body) {
    return [&, body] {
      try {
        body();
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        stop = true;
      }
    };
  };
  for (int p = 0; p < kProducers; ++p) {
    threads.emplace_back(guarded([&, p] {
      std::vector<boxcar::AcceptRequest> batch;
      for (long long j = 0; !stop; ++j) {
        const auto due = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                                     static_cast<double>(j * kAcceptBatch) / per_producer));
        if (due >= end) break;
        std::this_thread::sleep_until(due);
        batch.clear();
        for (int k = 0; k < kAcceptBatch; ++k)
          batch.push_back({.scope = boxcar::Scope::tenant("tenant-" + std::to_string((j + k + p) % 997)),
                           .source = "orders-service",
                           .consumer = kConsumer,
                           .message_id = boxcar::uuid_v7(),
                           .event_type = "order.created",
                           .schema_version = 1,
                           .payload = {{"orderId", "o-" + std::to_string(p) + "-" + std::to_string(j)},
                                       {"note", std::string(300, 'x')},
                                       {"acceptedAt", micros_now()}}});
        for (const auto& r : inbox.accept_many(batch)) r.rethrow_if_error();
        accepted += kAcceptBatch;
      }
    }));
  }
  const auto past_retention = [&](pqxx::connection& c) {
    pqxx::nontransaction n(c);
    return n
        .exec_params1("SELECT count(*) FROM " + std::string(schema) +
                          ".inbox_receipts WHERE status = 'COMPLETED' AND completed_at < now() - $1::interval",
                      "1 hour")[0]
        .as<std::int64_t>();
  };
  pqxx::connection monitor(s.url);
  result.backlog_at_start = past_retention(monitor);
  const std::int64_t backlog = result.backlog_at_start;
  std::atomic<double> caught_up{-1};
  if (purge) {
    threads.emplace_back(guarded([&] {
      while (!stop && Clock::now() < end) {
        const auto round = Clock::now();
        const auto report = boxcar::purge(*pool, schema,
                                          {.inbox_retention = kRetention,
                                           .outbox_retention = std::chrono::hours(24 * 365),
                                           .batch_size = kPurgeBatch});
        purged += report.inbox_deleted;
        if (caught_up < 0 && purged >= backlog) caught_up = since(start);
        std::this_thread::sleep_until(round + kPurgeInterval);
      }
    }));
  }
  while (!stop && Clock::now() < end) {
    std::this_thread::sleep_for(1s);
    result.samples.push_back(sample(monitor, schema, since(start), accepted, worker.stats().completed, purged));
  }
  stop = true;
  for (auto& t : threads) t.join();
  if (error) std::rethrow_exception(error);
  // Counted when the purge stops (with the producers), not after the drain's tail below.
  result.left_past_retention = past_retention(monitor);
  // Rows accepted in the phase still being handled finish before the clock stops.
  const auto drained_by = Clock::now() + 60s;
  while (worker.stats().completed < accepted && Clock::now() < drained_by) std::this_thread::sleep_for(5ms);
  result.seconds = since(start);
  worker.stop();
  result.accepted = accepted;
  result.completed = worker.stats().completed;
  result.purged = purged;
  result.catch_up_seconds = caught_up;
  return result;
}

// The start of a phase is not steady: the purge catches up its backlog, the worker and the
// table's caches warm up. The pickup ratio compares what follows.
double warmup(double seconds) { return std::min(30.0, seconds / 3); }

void print_phase(const PhaseResult& r) {
  std::cout << "  " << r.schema << ": " << fixed(r.seconds, 1) << " s, accepted " << r.accepted << " ("
            << fixed(static_cast<double>(r.accepted) / r.seconds, 0) << "/s), completed " << r.completed << " ("
            << fixed(static_cast<double>(r.completed) / r.seconds, 0) << "/s), purged " << r.purged << " ("
            << fixed(static_cast<double>(r.purged) / r.seconds, 0) << "/s), left past retention "
            << r.left_past_retention << "\n"
            << "    pickup ms p50 " << fixed(r.percentile(0.50), 1) << " p99 " << fixed(r.percentile(0.99), 1)
            << " max " << fixed(r.percentile(1.0), 1) << "; after the first " << fixed(warmup(r.seconds), 0)
            << " s: p50 " << fixed(r.percentile(0.50, warmup(r.seconds)), 1) << " p99 "
            << fixed(r.percentile(0.99, warmup(r.seconds)), 1) << "\n    dead tuples max " << r.max_dead()
            << ", second-half slope " << fixed(r.dead_slope(), 0) << "/s";
  std::cout << "; past retention at start " << r.backlog_at_start;
  if (r.catch_up_seconds >= 0) std::cout << ", purged after " << fixed(r.catch_up_seconds, 1) << " s";
  std::cout << std::flush;
  std::cout << "\n    t(s)  accepted  completed   purged  dead_tup  live_tup  table_MB  index_MB  autovacuums\n";
  for (std::size_t i = 0; i < r.samples.size(); i += 10) {
    const auto& x = r.samples[i];
    std::cout << "    " << std::setw(4) << fixed(x.at, 0) << std::setw(10) << x.accepted << std::setw(11) << x.completed
              << std::setw(9) << x.purged << std::setw(10) << x.dead_tuples << std::setw(10) << x.live_tuples
              << std::setw(10) << fixed(static_cast<double>(x.table_bytes) / 1e6, 1) << std::setw(10)
              << fixed(static_cast<double>(x.index_bytes) / 1e6, 1) << std::setw(13) << x.autovacuums << "\n";
  }
}

double median(std::vector<double> v) { return boxcar::bench::median(std::move(v)); }

}  // namespace

int main(int argc, char** argv) {
  try {
    Settings s;
    // One purge log line per second per phase would bury the figures.
    spdlog::set_level(spdlog::level::warn);
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      const auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw boxcar::bench::UsageError(arg + " needs a value");
        return argv[++i];
      };
      if (arg == "--database-url")
        s.url = value();
      else if (arg == "--rate")
        s.rate = std::stoi(value());
      else if (arg == "--seconds")
        s.seconds = std::stoi(value());
      else if (arg == "--backlog-seconds")
        s.backlog_seconds = std::stoi(value());
      else if (arg == "--rounds")
        s.rounds = std::stoi(value());
      else if (arg == "--vacuum-cost-delay")
        s.vacuum_cost_delay_ms = std::stoi(value());
      else
        throw boxcar::bench::UsageError("unknown argument " + arg);
    }
    if (s.url.empty()) throw boxcar::bench::UsageError("--database-url is required");
    if (s.rate < kProducers * kAcceptBatch || s.seconds < 10 || s.backlog_seconds < 0 || s.rounds < 1)
      throw boxcar::bench::UsageError("--rate >= 200, --seconds >= 10, --backlog-seconds >= 0, --rounds >= 1");
    for (const char* schema : {kKept, kPurged}) {
      Admin(s.url).exec(std::string("DROP SCHEMA IF EXISTS ") + schema + " CASCADE");
      boxcar::migrate(s.url, {.schema = schema});
      Admin(s.url).exec(std::string("CREATE TABLE ") + schema + ".app_rows (message_id text NOT NULL)");
      if (s.vacuum_cost_delay_ms >= 0)
        Admin(s.url).exec(
            std::string("ALTER TABLE ") + schema +
            ".inbox_receipts SET (autovacuum_vacuum_cost_delay = " + std::to_string(s.vacuum_cost_delay_ms) + ")");
    }
    std::cout << "bench_retention: " << s.rate << " msg/s for " << s.seconds << " s per phase, backlog "
              << s.backlog_seconds << " s, purge every 1 s in batches of " << kPurgeBatch << ", " << s.rounds
              << " round(s) of kept then purged, autovacuum_vacuum_cost_delay "
              << (s.vacuum_cost_delay_ms < 0 ? std::string("as migrated")
                                             : std::to_string(s.vacuum_cost_delay_ms) + " ms")
              << "\n";
    std::vector<double> drain, pickup, keeps_up;
    for (int round = 1; round <= s.rounds; ++round) {
      std::cout << "round " << round << "\n";
      const auto kept = run_phase(s, kKept, false);
      print_phase(kept);
      const auto purged = run_phase(s, kPurged, true);
      print_phase(purged);
      const auto rate = [](const PhaseResult& r) { return static_cast<double>(r.completed) / r.seconds; };
      drain.push_back(rate(purged) / rate(kept));
      const double from = warmup(s.seconds);
      pickup.push_back(purged.percentile(0.99, from) > 0 ? kept.percentile(0.99, from) / purged.percentile(0.99, from)
                                                         : 0);
      const double due = static_cast<double>(purged.purged + purged.left_past_retention);
      keeps_up.push_back(due > 0 ? static_cast<double>(purged.purged) / due : 0);
    }
    std::cout << "\n";
    const auto line = [](const char* name, double value, double target) {
      std::cout << "ratio " << name << " " << fixed(value, 2) << " " << fixed(target, 2) << "\n";
    };
    line("retention_drain", median(drain), 0.95);
    line("retention_pickup_p99", median(pickup), 0.90);
    line("retention_keeps_up", median(keeps_up), 0.98);
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << "bench_retention: " << e.what() << "\nusage: bench_retention --database-url URL [--rate R] "
              << "[--seconds S] [--backlog-seconds B] [--rounds N] [--vacuum-cost-delay MS]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_retention: " << e.what() << "\n";
    return 1;
  }
}
