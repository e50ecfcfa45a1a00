// bench_fairness: what the tenant-fair claim (WorkerOptions::fair_claims, docs/worker.md,
// "Claims") buys and costs, where one tenant's backlog is far ahead of everyone else's.
//
//   scripts/bench fairness [--hot N] [--tenants T] [--per-tenant M] [--rate R] [--rounds K]
//
// Scenario: one hot tenant with a backlog of N (default 100,000) accepted before the run
// starts, and T (default 99) small tenants with M (default 100) messages each, accepted
// one at a time at a steady R msg/s (default 400, round robin over the small tenants) by
// four feeder threads while a Worker (16 handler threads, batch 1, claim limit 32; the
// handler inserts one application row) drains. Each run ends when every receipt is
// COMPLETED. Four runs per round, fair and unfair, each with and without the hot backlog:
//   - small tenants' accept->complete latency, p50/p99: completed_at - created_at of their
//     receipts (both the start time of their transaction: the accept's and the handler's);
//   - total throughput of the runs with the hot backlog: (N + T*M) / time from start to
//     the last completion.
// Ratio lines (medians over the rounds):
//   ratio small_p99_hot_vs_alone VALUE 2.00   fair claim: p99 with the hot backlog / without
//                                              (lower is better; target within 2x)
//   ratio total_throughput_fair_vs_unfair VALUE 0.80   (higher is better; target >= 0.8)
// and, informational, the unfair claim's small-tenant p99 ratio (what fairness fixes).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/core/migrate.hpp"
#include "harness.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using Clock = std::chrono::steady_clock;

constexpr const char* kSchema = "bench_fairness";
constexpr const char* kConsumer = "fair.v1";
constexpr std::size_t kThreads = 16;
constexpr int kFeeders = 4;
constexpr double kTargetLatency = 2.0;
constexpr double kTargetThroughput = 0.80;

struct Scenario {
  int hot = 100000;
  int tenants = 99;
  int per_tenant = 100;
  int rate = 400;
};

struct RunResult {
  double p50_ms = 0;
  double p99_ms = 0;
  double seconds = 0;
  long long total = 0;
  std::uint64_t claim_statements = 0;
  double rate() const { return seconds > 0 ? static_cast<double>(total) / seconds : 0; }
};

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

boxcar::AcceptRequest message(const std::string& tenant, int i) {
  return {.scope = boxcar::Scope::tenant(tenant),
          .source = "bench",
          .consumer = kConsumer,
          .message_id = tenant + "-" + std::to_string(i),
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", "o-" + std::to_string(i)}, {"total", 12.5}}};
}

class InsertRow final : public boxcar::InboxHandler {
 public:
  void handle(const nlohmann::json&, boxcar::HandlerContext& context) override {
    context.tx.exec_prepared("bench.app_row",
                             std::string("INSERT INTO ") + kSchema + ".app_rows (message_id, attempt) VALUES ($1, $2)",
                             context.message_id, context.attempt);
  }
};

// Empty tables, then the hot backlog (untimed), vacuumed and analysed like a table that
// has been running for a while.
void prepare(const std::string& url, const std::shared_ptr<boxcar::ConnectionPool>& pool, int hot) {
  Admin admin(url);
  admin.exec(std::string("TRUNCATE ") + kSchema + ".inbox_receipts, " + kSchema + ".app_rows");
  boxcar::Inbox inbox(pool, {.schema = kSchema, .consumers = {kConsumer}, .notify = false});
  std::vector<boxcar::AcceptRequest> batch;
  for (int i = 0; i < hot; ++i) {
    batch.push_back(message("hot", i));
    if (batch.size() == 1000 || i + 1 == hot) {
      for (const auto& r : inbox.accept_many(batch)) r.rethrow_if_error();
      batch.clear();
    }
  }
  admin.exec(std::string("VACUUM ANALYZE ") + kSchema + ".inbox_receipts");
  admin.checkpoint();
}

RunResult run(const std::string& url, const Scenario& scenario, bool fair, bool with_hot) {
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = kThreads + 2 + kFeeders});
  prepare(url, pool, with_hot ? scenario.hot : 0);
  const long long small = static_cast<long long>(scenario.tenants) * scenario.per_tenant;
  const long long total = small + (with_hot ? scenario.hot : 0);

  boxcar::Worker worker(
      pool,
      {.schema = kSchema,
       .consumers = {kConsumer},
       .concurrency = kThreads,
       .claim_limit = 32,
       .fair_claims = fair,
       .lease = 60s,
       .handler_timeout = 30s,
       .poll_interval = 100ms},
      {{.consumer = kConsumer, .supports = {{"order.created", 1}}, .handler = std::make_shared<InsertRow>()}});
  boxcar::Inbox inbox(pool, {.schema = kSchema, .consumers = {kConsumer}});
  const auto start = Clock::now();
  worker.start();
  // Feeder f accepts messages f, f + kFeeders, ... of the round-robin sequence over the
  // small tenants, each at its slot of the steady rate.
  std::vector<std::thread> feeders;
  std::mutex error_mutex;
  std::exception_ptr error;
  const auto interval = std::chrono::nanoseconds(1'000'000'000LL / scenario.rate);
  for (int f = 0; f < kFeeders; ++f) {
    feeders.emplace_back([&, f] {
      try {
        for (long long k = f; k < small; k += kFeeders) {
          std::this_thread::sleep_until(start + interval * k);
          const int tenant = static_cast<int>(k % scenario.tenants);
          const int i = static_cast<int>(k / scenario.tenants);
          inbox.accept(message("small-" + std::to_string(tenant), i));
        }
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    });
  }
  for (auto& t : feeders) t.join();
  if (error) std::rethrow_exception(error);
  // The worker's own count: a count(*) over the table every few ms would load the 2
  // cores this runs on.
  while (worker.stats().completed < static_cast<std::uint64_t>(total)) std::this_thread::sleep_for(5ms);
  RunResult result{.seconds = seconds_since(start), .total = total};
  worker.stop();
  result.claim_statements = worker.stats().claim_statements;

  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  const auto row = n.exec1(std::string("SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY ms), "
                                       "percentile_cont(0.99) WITHIN GROUP (ORDER BY ms) FROM (SELECT "
                                       "extract(epoch FROM completed_at - created_at) * 1000 AS ms FROM ") +
                           kSchema + ".inbox_receipts WHERE scope_id <> 'hot') AS l");
  result.p50_ms = row[0].as<double>();
  result.p99_ms = row[1].as<double>();
  return result;
}

void print_run(const std::string& name, const RunResult& r) {
  std::cout << std::fixed << std::setprecision(1) << "  " << std::left << std::setw(16) << name << std::right
            << " small p50 " << std::setw(8) << r.p50_ms << " ms  p99 " << std::setw(8) << r.p99_ms << " ms   "
            << r.total << " msgs in " << std::setprecision(2) << r.seconds << " s = " << std::setprecision(0)
            << r.rate() << " msg/s, " << r.claim_statements << " claim statements\n";
}

double median(std::vector<double> v) { return boxcar::bench::median(std::move(v)); }

}  // namespace

int main(int argc, char** argv) {
  try {
    Scenario scenario;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--hot" && i + 1 < argc)
        scenario.hot = std::stoi(argv[++i]);
      else if (flag == "--tenants" && i + 1 < argc)
        scenario.tenants = std::stoi(argv[++i]);
      else if (flag == "--per-tenant" && i + 1 < argc)
        scenario.per_tenant = std::stoi(argv[++i]);
      else if (flag == "--rate" && i + 1 < argc)
        scenario.rate = std::stoi(argv[++i]);
      else
        rest.push_back(argv[i]);
    }
    if (scenario.tenants < 1 || scenario.per_tenant < 1 || scenario.rate < 1 || scenario.hot < 0)
      throw boxcar::bench::UsageError("--hot, --tenants, --per-tenant and --rate need positive numbers");
    // parse_options insists on 3 rounds or more; this benchmark's runs are long, so it
    // takes --rounds 1 or 2 here too.
    int rounds = 1;
    for (std::size_t i = 1; i + 1 < rest.size(); ++i)
      if (std::string(rest[i]) == "--rounds") {
        rounds = std::max(1, std::stoi(rest[i + 1]));
        rest.erase(rest.begin() + static_cast<long>(i), rest.begin() + static_cast<long>(i) + 2);
        break;
      }
    const auto options = boxcar::bench::parse_options(static_cast<int>(rest.size()), rest.data());
    const std::string& url = options.database_url;
    Admin(url).exec(std::string("DROP SCHEMA IF EXISTS ") + kSchema + " CASCADE");
    boxcar::migrate(url, {.schema = kSchema});
    Admin(url).exec(std::string("CREATE TABLE ") + kSchema +
                    ".app_rows (message_id text NOT NULL, attempt int NOT NULL)");

    std::cout << "bench_fairness: hot backlog " << scenario.hot << ", " << scenario.tenants << " small tenants x "
              << scenario.per_tenant << " arriving at " << scenario.rate << " msg/s; worker " << kThreads
              << " threads, batch 1, claim 32; " << rounds << " round(s)\n";
    std::vector<double> fair_ratio, unfair_ratio, throughput_ratio;
    for (int round = 1; round <= rounds; ++round) {
      std::cout << "round " << round << ":\n";
      const auto fair_alone = run(url, scenario, true, false);
      print_run("fair, alone", fair_alone);
      const auto fair_hot = run(url, scenario, true, true);
      print_run("fair, hot", fair_hot);
      const auto unfair_alone = run(url, scenario, false, false);
      print_run("unfair, alone", unfair_alone);
      const auto unfair_hot = run(url, scenario, false, true);
      print_run("unfair, hot", unfair_hot);
      fair_ratio.push_back(fair_hot.p99_ms / fair_alone.p99_ms);
      unfair_ratio.push_back(unfair_hot.p99_ms / unfair_alone.p99_ms);
      throughput_ratio.push_back(fair_hot.rate() / unfair_hot.rate());
    }
    std::cout << "\n"
              << std::fixed << std::setprecision(2) << "ratio small_p99_hot_vs_alone " << median(fair_ratio) << " "
              << kTargetLatency << "\n"
              << "ratio total_throughput_fair_vs_unfair " << median(throughput_ratio) << " " << kTargetThroughput
              << "\n"
              << "info unfair_small_p99_hot_vs_alone " << median(unfair_ratio) << "\n";
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << e.what() << "\n"
              << boxcar::bench::usage(argv[0]) << " [--hot N] [--tenants T] [--per-tenant M] [--rate R]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_fairness failed: " << e.what() << "\n";
    return 1;
  }
}
