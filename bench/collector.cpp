// bench_collector: the database time of one backlog collection cycle for a whole fleet,
// at 0 and at 1,000,000 backlog rows, the elected collector beside the design before it
// (every process counting the whole backlog itself), in the same run.
//
//   scripts/bench collector [--pending N] [--completed N] [--consumers N] [--processes N]
//                           [--rounds N] [--cap N] [--explain]
//
// Loads `completed` COMPLETED receipts (2,000,000) with generate_series, measures, then
// adds `pending` PENDING receipts (1,000,000) over `consumers` (4) consumers, due over the
// last hour and spread in index order over the whole block (each consumer's oldest rows
// are on far-apart heap pages), ANALYZE (no VACUUM: no visibility map, the conservative
// case), and measures again. Per backlog, the median over `rounds` of:
//   - old: one process's cycle with the previous collector's queries (kept below), in one
//     read-only transaction; the fleet pays it once per process;
//   - elected: BacklogCollector::collect_once() of the process that computes (the
//     snapshot is made stale before each round), capped counts and estimates;
//   - reader: collect_once() of a process that finds the figures fresh and exports them.
// A fleet of `processes` (3) pays old × processes, or elected + (processes - 1) × reader.
// Wall time of the cycle from the client, on loopback: the database time plus a few
// round trips, so an upper bound of it.
// Prints `ratio collector_cycle_1m VALUE 1.00` with VALUE = 50 ms / the new fleet cycle
// at the full backlog (≥ 1.00 meets the target), and with --explain the
// EXPLAIN (ANALYZE, BUFFERS) of the new per-consumer queries, as prepared, at the backlog.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "boxcar/core/metrics.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/ops/backlog_collector.hpp"

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kSchema = "bench_collector";

struct Args {
  std::string database_url;
  long pending = 1'000'000;
  long completed = 2'000'000;
  int consumers = 4;
  int processes = 3;
  int rounds = 5;
  long cap = static_cast<long>(boxcar::BacklogOptions{}.exact_cap);
  bool explain = false;
};

Args parse(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--explain") {
      args.explain = true;
      continue;
    }
    if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
    const std::string value = argv[++i];
    if (flag == "--database-url")
      args.database_url = value;
    else if (flag == "--pending")
      args.pending = std::stol(value);
    else if (flag == "--completed")
      args.completed = std::stol(value);
    else if (flag == "--consumers")
      args.consumers = std::stoi(value);
    else if (flag == "--processes")
      args.processes = std::stoi(value);
    else if (flag == "--rounds")
      args.rounds = std::stoi(value);
    else if (flag == "--cap")
      args.cap = std::stol(value);
    else
      throw std::invalid_argument("unknown flag " + flag);
  }
  if (args.database_url.empty()) throw std::invalid_argument("--database-url is required");
  if (args.consumers < 1 || args.processes < 1 || args.rounds < 1 || args.cap < 1)
    throw std::invalid_argument("--consumers, --processes, --rounds and --cap must be at least 1");
  return args;
}

// The collector's queries before the elected, capped collection (ops/src/backlog_queries.hpp
// at 10e14a5): each counts its whole partial index, in every process.
constexpr const char* kOldQueries[] = {
    R"SQL(
SELECT consumer,
       pg_catalog.count(*) FILTER (WHERE status = 'PENDING') AS pending,
       pg_catalog.count(*) FILTER (WHERE status = 'RETRYABLE') AS retryable,
       coalesce(extract(epoch FROM pg_catalog.now() - pg_catalog.min(available_at) FILTER (WHERE available_at <= pg_catalog.now())), 0)::float8
         AS oldest_due_age
FROM {schema}.inbox_receipts
WHERE status IN ('PENDING', 'RETRYABLE')
GROUP BY consumer)SQL",
    R"SQL(
SELECT consumer, pg_catalog.count(*) AS processing
FROM {schema}.inbox_receipts
WHERE status = 'PROCESSING'
GROUP BY consumer)SQL",
    R"SQL(
SELECT consumer, pg_catalog.count(*) AS dead
FROM {schema}.inbox_receipts
WHERE status = 'DEAD'
  AND discarded_at IS NULL
GROUP BY consumer)SQL",
    R"SQL(
SELECT pg_catalog.count(*) FILTER (WHERE status = 'PENDING') AS pending,
       pg_catalog.count(*) FILTER (WHERE status = 'RETRYABLE') AS retryable,
       coalesce(extract(epoch FROM pg_catalog.now() - pg_catalog.min(created_at)), 0)::float8 AS oldest_age
FROM {schema}.outbox_events
WHERE status IN ('PENDING', 'RETRYABLE'))SQL",
    R"SQL(
SELECT pg_catalog.count(*) AS publishing,
       coalesce(extract(epoch FROM pg_catalog.now() - pg_catalog.min(created_at)), 0)::float8 AS oldest_age
FROM {schema}.outbox_events
WHERE status = 'PUBLISHING')SQL",
    R"SQL(
SELECT pg_catalog.count(*) AS dead
FROM {schema}.outbox_events
WHERE status = 'DEAD'
  AND discarded_at IS NULL)SQL",
};

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const auto n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct Cycle {
  double old_ms = 0;
  double elected_ms = 0;
  double reader_ms = 0;
};

class Bench {
 public:
  explicit Bench(Args args)
      : args_(std::move(args)),
        admin_(args_.database_url),
        pool_(boxcar::ConnectionPool::create({.url = args_.database_url, .size = 2})),
        metrics_(std::make_shared<boxcar::Metrics>()),
        elected_(pool_, metrics_, {.schema = kSchema, .interval = std::chrono::hours(1), .exact_cap = args_.cap}),
        reader_(pool_, metrics_, {.schema = kSchema, .interval = std::chrono::hours(1), .exact_cap = args_.cap}) {}

  void exec(const std::string& sql) { pqxx::nontransaction(admin_).exec(boxcar::detail::with_schema(sql, kSchema)); }

  // The old cycle: every query of the previous collector in one read-only transaction.
  double old_cycle() {
    const auto start = Clock::now();
    pqxx::work tx(admin_);
    tx.exec("SET TRANSACTION READ ONLY");
    for (const char* sql : kOldQueries) tx.exec(boxcar::detail::with_schema(sql, kSchema));
    tx.commit();
    return ms_since(start);
  }

  Cycle measure(const std::string& label) {
    // Warm-up: one of each, so every round reads the same cache state.
    old_cycle();
    exec("UPDATE {schema}.backlog_snapshot SET collected_at = '-infinity'");
    elected_.collect_once();
    std::vector<double> old, elected, reader;
    for (int round = 0; round < args_.rounds; ++round) {
      old.push_back(old_cycle());
      exec("UPDATE {schema}.backlog_snapshot SET collected_at = '-infinity'");
      auto start = Clock::now();
      elected_.collect_once();
      elected.push_back(ms_since(start));
      start = Clock::now();
      reader_.collect_once();
      reader.push_back(ms_since(start));
    }
    const Cycle cycle{median(old), median(elected), median(reader)};
    std::printf("%-28s old %9.2f ms/process   elected %8.2f ms   reader %6.2f ms\n", label.c_str(), cycle.old_ms,
                cycle.elected_ms, cycle.reader_ms);
    const int n = args_.processes;
    std::printf("%-28s fleet of %d: old %9.2f ms   new %8.2f ms\n", "", n, cycle.old_ms * n,
                cycle.elected_ms + (n - 1) * cycle.reader_ms);
    return cycle;
  }

  void load_completed() {
    exec(
        "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
        "schema_version, payload, fingerprint, status, completed_at) "
        "SELECT 'tenant', 't' || (g % 97), 'bench', 'consumer-' || (g % " +
        std::to_string(args_.consumers) +
        "), 'c-' || g, 'thing.happened', 1, '{}'::jsonb, repeat('f', 64), 'COMPLETED', now() "
        "FROM generate_series(1, " +
        std::to_string(args_.completed) + ") AS g");
  }

  void load_pending() {
    exec(
        "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
        "schema_version, payload, fingerprint, status, available_at) "
        "SELECT 'tenant', 't' || (g % 97), 'bench', 'consumer-' || (g % " +
        std::to_string(args_.consumers) +
        "), 'p-' || g, 'thing.happened', 1, '{}'::jsonb, repeat('f', 64), 'PENDING', "
        "now() - make_interval(secs => (g % 3600)::float8) "
        "FROM generate_series(1, " +
        std::to_string(args_.pending) + ") AS g");
  }

  void explain() {
    const auto queries = boxcar::BacklogCollector::queries(kSchema);
    for (const auto& query : queries) {
      if (query.name != "inbox_claimable" && query.name != "inbox_processing" && query.name != "inbox_dead" &&
          query.name != "inbox_estimates")
        continue;
      const bool estimates = query.name == "inbox_estimates";
      pqxx::work tx(admin_);
      // As the collector's transaction runs them (backlog_collector.cpp).
      tx.exec("SET LOCAL jit = off");
      tx.exec("SET LOCAL enable_bitmapscan = off");
      tx.exec("PREPARE bench_explain(" + std::string(estimates ? "text" : "bigint") + ") AS " + query.sql);
      const std::string argument = estimates ? std::string("'") + kSchema + "'" : std::to_string(args_.cap + 1);
      std::cout << "\n#### " << query.name << " (EXPLAIN (ANALYZE, BUFFERS) EXECUTE with $1 = " << argument
                << ")\n\n```text\n";
      for (const auto& row : tx.exec("EXPLAIN (ANALYZE, BUFFERS) EXECUTE bench_explain(" + argument + ")"))
        std::cout << row[0].c_str() << "\n";
      std::cout << "```\n";
      tx.exec("DEALLOCATE bench_explain");  // prepared statements outlive the transaction
      tx.abort();
    }
  }

  std::string scrape_line(const std::string& consumer, const std::string& status) const {
    const std::string text = metrics_->serialize();
    std::string found;
    for (const std::string& metric :
         {std::string("boxcar_inbox_receipts{"), std::string("boxcar_inbox_receipts_estimated{")}) {
      const std::string key = metric + "consumer=\"" + consumer + "\",status=\"" + status + "\"}";
      const auto at = text.find(key);
      if (at != std::string::npos) found += text.substr(at, text.find('\n', at) - at) + "   ";
    }
    return found;
  }

  const Args& args() const { return args_; }

 private:
  Args args_;
  pqxx::connection admin_;
  std::shared_ptr<boxcar::ConnectionPool> pool_;
  std::shared_ptr<boxcar::Metrics> metrics_;
  boxcar::BacklogCollector elected_;
  boxcar::BacklogCollector reader_;
};

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what()
              << "\nusage: bench_collector --database-url URL [--pending N] [--completed N] [--consumers N] "
                 "[--processes N] [--rounds N] [--cap N] [--explain]\n";
    return 2;
  }
  try {
    {
      pqxx::connection c(args.database_url);
      pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + boxcar::quote_identifier(kSchema) + " CASCADE");
    }
    boxcar::migrate(args.database_url, {.schema = kSchema});
    Bench bench(args);
    std::cout << "collector cycle: " << args.completed << " COMPLETED, then " << args.pending << " PENDING over "
              << args.consumers << " consumers; cap " << args.cap << ", " << args.rounds << " rounds (medians)"
              << std::endl;
    auto start = Clock::now();
    bench.load_completed();
    bench.exec("ANALYZE {schema}.inbox_receipts");
    std::printf("loaded %ld COMPLETED in %.1f s\n", args.completed, ms_since(start) / 1000);
    const Cycle empty = bench.measure("backlog 0");

    start = Clock::now();
    bench.load_pending();
    bench.exec("ANALYZE {schema}.inbox_receipts");
    std::printf("loaded %ld PENDING in %.1f s\n", args.pending, ms_since(start) / 1000);
    const Cycle full = bench.measure("backlog " + std::to_string(args.pending));
    std::cout << "exported: " << bench.scrape_line("consumer-0", "PENDING")
              << "(exact: " << args.pending / args.consumers + (args.pending % args.consumers > 0 ? 1 : 0) << ")\n";
    if (args.explain) bench.explain();

    const int n = args.processes;
    const double new_fleet = full.elected_ms + (n - 1) * full.reader_ms;
    std::printf("\nms collector_cycle_0_old_fleet %.2f\n", empty.old_ms * n);
    std::printf("ms collector_cycle_0_new_fleet %.2f\n", empty.elected_ms + (n - 1) * empty.reader_ms);
    std::printf("ms collector_cycle_1m_old_fleet %.2f\n", full.old_ms * n);
    std::printf("ms collector_cycle_1m_new_fleet %.2f\n", new_fleet);
    std::printf("ratio collector_cycle_1m %.2f 1.00\n", 50.0 / new_fleet);
  } catch (const std::exception& e) {
    std::cerr << "bench_collector: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
