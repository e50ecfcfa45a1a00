// bench_migrate_online: accept() latency while `migrate()` upgrades a schema whose inbox
// holds 1M rows, beside the same clients' latency just before, in the same run.
//
//   scripts/bench migrate_online [--rows N] [--clients N] [--baseline-seconds S]
//
// The schema starts at migration 2 (before 0003), the inbox is filled with N receipts
// (98 % COMPLETED, 1 % DEAD, 1 % PENDING), then `clients` threads call accept() in a loop
// (one pooled connection each, fresh ids) while the main thread runs migrate() up to the
// newest version: 0003-0004 (ALTER TABLE, views; bounded by lock_timeout) and the four
// CREATE INDEX CONCURRENTLY steps 0005-0008. Prints p50/p99/max per phase and the line
// `target accept_p99_during_migration_ms VALUE 50` (docs/benchmarks.md). A last phase
// rebuilds the four indexes non-concurrently in one transaction, as 0003 used to, for
// reference.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/inbox/inbox.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kSchema = "bench_migrate_online";

struct Args {
  std::string database_url;
  long rows = 1'000'000;
  int clients = 4;
  double baseline_seconds = 3.0;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string value = argv[i + 1];
    if (flag == "--database-url")
      args.database_url = value;
    else if (flag == "--rows")
      args.rows = std::stol(value);
    else if (flag == "--clients")
      args.clients = std::stoi(value);
    else if (flag == "--baseline-seconds")
      args.baseline_seconds = std::stod(value);
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  if (args.database_url.empty()) throw std::invalid_argument("--database-url is required");
  return args;
}

double percentile_ms(std::vector<double>& samples, double p) {
  if (samples.empty()) return 0;
  std::sort(samples.begin(), samples.end());
  const auto index = static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(index, samples.size() - 1)];
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what()
              << "\nusage: bench_migrate_online --database-url URL [--rows N] [--clients N] "
                 "[--baseline-seconds S]\n";
    return 2;
  }
  const std::string q = boxcar::quote_identifier(kSchema);
  {
    pqxx::connection c(args.database_url);
    pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + q + " CASCADE");
  }
  boxcar::migrate(args.database_url, {.schema = kSchema, .target_version = 2});
  std::cout << "filling " << q << ".inbox_receipts with " << args.rows << " rows..." << std::endl;
  {
    pqxx::connection c(args.database_url);
    pqxx::nontransaction tx(c);
    tx.exec_params(
        "INSERT INTO " + q +
            ".inbox_receipts (scope_kind, source, consumer, message_id, event_type, schema_version, payload, "
            "fingerprint, status, completed_at, dead_reason) "
            "SELECT 'global', 's', 'c' || (g % 16), 'm' || g, 'e', 1, '{\"n\": 1}', repeat('a', 64), "
            "CASE WHEN g % 100 = 0 THEN 'DEAD' WHEN g % 100 = 1 THEN 'PENDING' ELSE 'COMPLETED' END, "
            "CASE WHEN g % 100 > 1 THEN now() END, CASE WHEN g % 100 = 0 THEN 'x' END "
            "FROM generate_series(1, $1::bigint) g",
        args.rows);
    tx.exec("VACUUM ANALYZE " + q + ".inbox_receipts");
    tx.exec("CHECKPOINT");
  }

  auto pool =
      boxcar::ConnectionPool::create({.url = args.database_url, .size = static_cast<std::size_t>(args.clients)});
  boxcar::Inbox inbox(pool, {.schema = kSchema, .consumers = {"orders.v1"}});
  std::atomic<int> phase{0};  // 0 baseline, 1 migrating, 2 idle, 3 blocking reference, 4 stop
  std::atomic<long> failures{0};
  std::mutex samples_mutex;
  std::vector<double> samples[3];
  std::vector<std::thread> clients;
  for (int t = 0; t < args.clients; ++t) {
    clients.emplace_back([&, t] {
      std::vector<double> local[3];
      for (long n = 0;; ++n) {
        const int before = phase.load();
        if (before == 4) break;
        const auto start = Clock::now();
        try {
          inbox.accept({.scope = boxcar::Scope::tenant("t"),
                        .source = "bench",
                        .consumer = "orders.v1",
                        .message_id = std::to_string(t) + "-" + std::to_string(n),
                        .event_type = "order.created",
                        .schema_version = 1,
                        .payload = {{"n", n}}});
        } catch (const std::exception& e) {
          ++failures;
          std::cerr << "accept failed: " << e.what() << "\n";
        }
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        // A call counts for a phase if it overlapped it at all.
        const int after = phase.load();
        if (before == 3 || after == 3)
          local[2].push_back(ms);
        else if (before == 1 || after == 1)
          local[1].push_back(ms);
        else if (before == 0)
          local[0].push_back(ms);
      }
      std::lock_guard lock(samples_mutex);
      for (int p = 0; p < 3; ++p) samples[p].insert(samples[p].end(), local[p].begin(), local[p].end());
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(args.baseline_seconds));
  phase = 1;
  const auto migrate_start = Clock::now();
  const auto report = boxcar::migrate(args.database_url, {.schema = kSchema});
  const double migrate_seconds = std::chrono::duration<double>(Clock::now() - migrate_start).count();
  phase = 2;
  // Reference: the same four indexes built the way 0003 used to, in one transaction
  // (CREATE INDEX takes SHARE on the table: every accept waits for the whole build).
  double blocking_seconds = 0;
  {
    pqxx::connection c(args.database_url);
    for (const char* index :
         {"inbox_receipts_dead", "outbox_events_dead", "inbox_receipts_completed", "outbox_events_published"})
      pqxx::nontransaction(c).exec("DROP INDEX " + q + "." + index);
    phase = 3;
    const auto start = Clock::now();
    pqxx::work tx(c);
    tx.exec("CREATE INDEX inbox_receipts_dead ON " + q +
            ".inbox_receipts (consumer, updated_at) WHERE status = 'DEAD'");
    tx.exec("CREATE INDEX outbox_events_dead ON " + q + ".outbox_events (updated_at) WHERE status = 'DEAD'");
    tx.exec("CREATE INDEX inbox_receipts_completed ON " + q +
            ".inbox_receipts (completed_at) WHERE status = 'COMPLETED'");
    tx.exec("CREATE INDEX outbox_events_published ON " + q +
            ".outbox_events (published_at) WHERE status = 'PUBLISHED'");
    tx.commit();
    blocking_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  }
  phase = 4;
  for (auto& c : clients) c.join();

  std::printf(
      "rows %ld, clients %d, migrations applied %zu (to version %d) in %.2f s, lock retries %zu, "
      "accept failures %ld\n",
      args.rows, args.clients, report.applied.size(), report.version, migrate_seconds, report.lock_retries.size(),
      failures.load());
  std::printf("%-18s %8s %9s %9s %9s\n", "phase", "accepts", "p50_ms", "p99_ms", "max_ms");
  std::printf("reference: the same indexes built in one transaction, as 0003 used to: %.2f s\n", blocking_seconds);
  const char* names[3] = {"before_migration", "during_migration", "blocking_reference"};
  double p99_during = 0;
  for (int p = 0; p < 3; ++p) {
    const double p50 = percentile_ms(samples[p], 0.50);
    const double p99 = percentile_ms(samples[p], 0.99);
    const double max = samples[p].empty() ? 0 : samples[p].back();
    if (p == 1) p99_during = p99;
    std::printf("%-18s %8zu %9.2f %9.2f %9.2f\n", names[p], samples[p].size(), p50, p99, max);
  }
  std::printf("target accept_p99_during_migration_ms %.2f 50\n", p99_during);
  {
    pqxx::connection c(args.database_url);
    pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + q + " CASCADE");
  }
  return failures == 0 && p99_during < 50 ? 0 : 1;
}
