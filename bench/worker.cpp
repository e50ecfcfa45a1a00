// bench_worker: how fast boxcar::Worker drains accepted messages, beside plain-libpqxx
// loops doing the same work on the same table shape, measured in the same run; and the
// accept -> handler-start latency with LISTEN/NOTIFY at a fixed offered rate.
//
//   scripts/bench worker [--rounds N] [--messages M] [--case NAME]...
//
// Two interleaved rounds per case unless --rounds N (at least 3) is given.
//
// Every drain starts from M accepted (PENDING) messages; the handler inserts one row
// into an application table in context.tx. Cases at 1, 4 and 16 handler threads:
//   per_message_tN  Worker{batch_size = 1}  vs (a): claim 32 with SKIP LOCKED, then per
//                   message one transaction: lock the row under its token, insert the
//                   app row, complete it;
//   batched_tN      Worker{batch_size = 32, default (Rerun) mode} vs (b): claim 32 with SKIP
//                   LOCKED, then one transaction with 32 app-row INSERTs and one UPDATE
//                   completing the 32.
//   batched_savepoint_t16  the same in Savepoint mode.
//   batch_handler_t16  Worker{batch_size = 32} with an InboxBatchHandler writing the 32 app
//                   rows in one unnest insert vs (c): claim 32, then one transaction with
//                   that unnest insert and one UPDATE completing the 32.
//   batch_handler_noreset_t16  (only when named) the same without the pool's session reset.
//   batch_handler_lockedraw_t16  (only when named) batch_handler_t16 vs (c) plus the one
//                   statement Boxcar's guarantees add to it: the lock of the 32 rows under
//                   their tokens before the handler runs. Splits the gap to (c) into what
//                   the guarantee costs and what the rest of the Worker costs.
//   session_reset_t16  per_message_t16 with the pool's session reset (the default) vs the
//                   same Worker with PoolOptions::reset_sessions = false: the reset's cost.
//   fair_claims_t16  batched_t16 with the tenant-fair claim (the default) vs the same Worker
//                   with fair_claims = false, on one tenant: what fairness costs there.
//   guarantee_sql_t16  (only when named) (a) vs (a) running Boxcar's own per-message
//                   statements, read from the library: the lock that sets the deadline, the
//                   guarded completion, and the COMMIT that resets the session. What the
//                   guarantees' SQL costs.
//   worker_machinery_t16  (only when named) that loop vs the Worker: what the Worker's
//                   threads, queue, pool and bookkeeping cost on top of the same SQL.
// --case NAME (repeatable) runs only the named cases (and skips the latency run unless
// --case latency is given); --case rss only the peak-RSS probe (bench/rss_probe.cpp).
// Each per_message case also prints `counts CASE SIDE transactions T wal_syncs W per
// message` from one more, untimed drain of each side. The last lines are `ratio CASE VALUE
// TARGET` for the per-message cases at 1, 4 and 16 threads and the other 16-thread cases.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/core/detail/named_statements.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/inbox/detail/named_statements.hpp"
#include "boxcar/core/pg_array.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "harness.hpp"
#include "peak_rss.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using boxcar::bench::CaseResult;
using boxcar::bench::Measurement;
using Clock = std::chrono::steady_clock;

constexpr const char* kBoxcarSchema = "bench_worker_boxcar";
constexpr const char* kRawSchema = "bench_worker_raw";
constexpr const char* kConsumer = "bench.v1";
constexpr std::size_t kClaim = 32;
constexpr double kTargetPerMessage = 0.80;
constexpr double kTargetBatched = 0.70;
constexpr double kTargetSessionReset = 0.90;
constexpr double kTargetBatchHandler = 0.90;
// Fairness is worth a little throughput where one tenant has everything, not more.
constexpr double kTargetFairClaims = 0.90;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

boxcar::AcceptRequest message(int i) {
  return {.scope = boxcar::Scope::tenant("tenant-1"),
          .source = "bench",
          .consumer = kConsumer,
          .message_id = "m-" + std::to_string(i),
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", "o-" + std::to_string(i)}, {"total", 12.5}}};
}

// Fills both schemas' inbox tables with `count` PENDING messages (untimed).
void load(const std::string& url, int count) {
  Admin admin(url);
  for (const char* schema : {kBoxcarSchema, kRawSchema}) {
    admin.exec(std::string("TRUNCATE ") + schema + ".inbox_receipts, " + schema + ".app_rows");
  }
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 4});
  boxcar::Inbox inbox(pool, {.schema = kBoxcarSchema, .consumers = {kConsumer}, .notify = false});
  std::vector<boxcar::AcceptRequest> batch;
  for (int i = 0; i < count; ++i) {
    batch.push_back(message(i));
    if (batch.size() == 1000 || i + 1 == count) {
      for (const auto& r : inbox.accept_many(batch)) r.rethrow_if_error();
      batch.clear();
    }
  }
  // The baseline drains an identical copy.
  admin.exec(std::string("INSERT INTO ") + kRawSchema +
             ".inbox_receipts (scope_kind, scope_id, source, consumer, "
             "message_id, event_type, schema_version, payload, metadata, fingerprint) SELECT scope_kind, scope_id, "
             "source, consumer, message_id, event_type, schema_version, payload, metadata, fingerprint FROM " +
             kBoxcarSchema + ".inbox_receipts");
  admin.exec(std::string("VACUUM ANALYZE ") + kBoxcarSchema + ".inbox_receipts");
  admin.exec(std::string("VACUUM ANALYZE ") + kRawSchema + ".inbox_receipts");
  admin.checkpoint();
}

class InsertRow final : public boxcar::InboxHandler {
 public:
  void handle(const nlohmann::json&, boxcar::HandlerContext& context) override {
    context.tx.exec_prepared(
        "bench.app_row",
        std::string("INSERT INTO ") + kBoxcarSchema + ".app_rows (message_id, attempt) VALUES ($1, $2)",
        context.message_id, context.attempt);
  }
};

std::string unnest_insert(const std::string& schema) {
  return "INSERT INTO " + schema +
         ".app_rows (message_id, attempt) SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int[]))";
}

// batch_handler_t16: the whole batch's application rows in one unnest insert.
class InsertRows final : public boxcar::InboxBatchHandler {
 public:
  boxcar::BatchOutcomes handle_batch(std::span<const boxcar::InboxMessage> messages,
                                     boxcar::BatchContext& context) override {
    std::vector<std::string> ids, attempts;
    for (const auto& m : messages) {
      ids.push_back(m.message_id);
      attempts.push_back(std::to_string(m.attempt));
    }
    context.tx.exec_prepared("bench.app_rows_unnest", unnest_insert(kBoxcarSchema), boxcar::pg_array(ids),
                             boxcar::pg_array(attempts));
    return boxcar::BatchOutcomes(messages.size(), boxcar::MessageOutcome::completed());
  }
};

// How a drain_boxcar() Worker runs; the defaults are the Worker's own.
struct Shape {
  std::size_t batch_size = 1;
  boxcar::BatchFailureMode mode = boxcar::WorkerOptions{}.batch_failure_mode;
  bool reset_sessions = boxcar::PoolOptions{}.reset_sessions;
  bool batch_handler = false;
  bool fair_claims = boxcar::WorkerOptions{}.fair_claims;
};

Measurement drain_boxcar(const std::string& url, int threads, int count, const Shape& shape) {
  const auto batch_size = shape.batch_size;
  const auto mode = shape.mode;
  const bool batch_handler = shape.batch_handler;
  auto pool = boxcar::ConnectionPool::create(
      {.url = url, .size = static_cast<std::size_t>(threads) + 2, .reset_sessions = shape.reset_sessions});
  boxcar::Worker worker(pool,
                        {.schema = kBoxcarSchema,
                         .consumers = {kConsumer},
                         .concurrency = static_cast<std::size_t>(threads),
                         .batch_size = batch_size,
                         .batch_failure_mode = mode,
                         .claim_limit = kClaim,
                         .fair_claims = shape.fair_claims,
                         .lease = 60s,
                         .handler_timeout = 30s,
                         .poll_interval = 50ms},
                        {batch_handler ? boxcar::HandlerRegistration{.consumer = kConsumer,
                                                                     .supports = {{"order.created", 1}},
                                                                     .batch_handler = std::make_shared<InsertRows>()}
                                       : boxcar::HandlerRegistration{.consumer = kConsumer,
                                                                     .supports = {{"order.created", 1}},
                                                                     .handler = std::make_shared<InsertRow>()}});
  const auto start = Clock::now();
  worker.start();
  boxcar::bench::wait_until([&] { return worker.stats().completed >= static_cast<std::uint64_t>(count); });
  const double elapsed = seconds_since(start);
  worker.stop();
  return {.units = static_cast<std::uint64_t>(count), .seconds = elapsed};
}

// The baselines' claim: the same statement shape as Boxcar's oldest-due claim (the update by an
// array of the picked ids: joined to them, a generic plan hash-joins the whole table).
const std::string kRawClaim = std::string(R"sql(
WITH due AS (
    SELECT id FROM )sql") + kRawSchema +
                              R"sql(.inbox_receipts
    WHERE consumer = $1 AND status IN ('PENDING', 'RETRYABLE') AND available_at <= now()
    ORDER BY available_at
    LIMIT $2
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE )sql" + kRawSchema + R"sql(.inbox_receipts AS r
SET status = 'PROCESSING', claim_token = gen_random_uuid(),
    lease_expires_at = now() + interval '60 seconds', attempts = r.attempts + 1, updated_at = now()
WHERE r.id = ANY ((SELECT array_agg(id) FROM due)::bigint[])
RETURNING r.id, r.claim_token::text, r.message_id, r.attempts
)sql";

// (a) per message, (b) batched with one INSERT per row, (c) batched with one unnest insert.
// UnnestLocked: (c) with the lock of the batch under its tokens first. GuaranteeSql: (a)
// with Boxcar's own lock, completion and commit statements in place of the plain ones.
enum class Raw { PerMessage, Batched, Unnest, UnnestLocked, GuaranteeSql };

// The SQL text the library runs for `name` (boxcar::detail::*_statements()), so the
// GuaranteeSql loop can never drift from the Worker's statements.
std::string library_sql(const std::string& name) {
  auto statements = boxcar::detail::inbox_statements();
  for (const auto& statement : boxcar::detail::core_unprepared_statements()) statements.push_back(statement);
  return boxcar::bench::library_sql(statements, name, kRawSchema);
}

// One message of the GuaranteeSql loop: the round trips of (a), with the statements the
// Worker sends for a message whose handler inserts one row (message_processor.cpp).
void guarantee_sql_message(pqxx::connection& c, const pqxx::row& claimed, const std::string& commit_and_reset) {
  pqxx::nontransaction n(c);
  n.exec("BEGIN");
  const auto locked = n.exec_prepared("lock", claimed[0].as<long long>(), claimed[1].c_str(), "30000", "31000");
  n.exec_prepared("app", claimed[2].c_str(), claimed[3].as<int>());
  n.exec_prepared("guarded_complete", claimed[0].as<long long>(), claimed[1].c_str(), locked[0]["xact_id"].c_str());
  n.exec(commit_and_reset);
}

Measurement drain_raw(const std::string& url, int threads, bool batched, Raw shape = Raw::Batched) {
  std::atomic<std::uint64_t> done{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mutex;
  const std::string raw = kRawSchema;
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&] {
      try {
        pqxx::connection c(url);
        c.prepare("claim", kRawClaim);
        const bool guarantee_sql = shape == Raw::GuaranteeSql;
        if (guarantee_sql)
          c.prepare("lock", library_sql("worker.lock"));
        else
          c.prepare("lock", "SELECT id FROM " + raw +
                                ".inbox_receipts WHERE id = $1 AND claim_token = $2::uuid "
                                "FOR NO KEY UPDATE");
        if (guarantee_sql) c.prepare("guarded_complete", library_sql("worker.complete"));
        const std::string commit_and_reset = guarantee_sql ? library_sql("core.commit_and_reset_session") : "";
        c.prepare("app", "INSERT INTO " + raw + ".app_rows (message_id, attempt) VALUES ($1, $2)");
        c.prepare("app_unnest", unnest_insert(raw));
        c.prepare("lock_many", "SELECT r.id FROM " + raw +
                                   ".inbox_receipts AS r JOIN unnest($1::bigint[], $2::uuid[]) AS c(id, token) "
                                   "ON r.id = c.id AND r.claim_token = c.token ORDER BY r.id FOR NO KEY UPDATE OF r");
        // No `status = 'PROCESSING'` beside the token, as in Boxcar's own statements: it lets
        // the planner scan the leases index instead of the primary key (docs/benchmarks.md,
        // "Guarded statements name no status"), and the baselines are the fastest raw form.
        c.prepare("complete", "UPDATE " + raw +
                                  ".inbox_receipts SET status = 'COMPLETED', claim_token = NULL, "
                                  "lease_expires_at = NULL, finished_attempts = finished_attempts + 1, "
                                  "completed_at = now(), updated_at = now() "
                                  "WHERE id = $1 AND claim_token = $2::uuid");
        c.prepare("complete_many",
                  "UPDATE " + raw +
                      ".inbox_receipts AS r SET status = 'COMPLETED', claim_token = NULL, "
                      "lease_expires_at = NULL, finished_attempts = r.finished_attempts + 1, completed_at = now(), "
                      "updated_at = now() FROM unnest($1::bigint[], $2::uuid[]) AS c(id, token) "
                      "WHERE r.id = c.id AND r.claim_token = c.token");
        while (!failed) {
          pqxx::result claimed;
          {
            pqxx::nontransaction n(c);
            claimed = n.exec_prepared("claim", kConsumer, static_cast<int>(kClaim));
          }
          if (claimed.empty()) return;
          if (guarantee_sql) {
            for (const auto& row : claimed) guarantee_sql_message(c, row, commit_and_reset);
          } else if (!batched) {
            for (const auto& row : claimed) {
              pqxx::work w(c);
              w.exec_prepared("lock", row[0].as<long long>(), row[1].c_str());
              w.exec_prepared("app", row[2].c_str(), row[3].as<int>());
              w.exec_prepared("complete", row[0].as<long long>(), row[1].c_str());
              w.commit();
            }
          } else if (shape == Raw::Unnest || shape == Raw::UnnestLocked) {
            pqxx::work w(c);
            std::vector<std::string> message_ids, attempts;
            std::string ids = "{", tokens = "{";
            for (const auto& row : claimed) {
              message_ids.emplace_back(row[2].c_str());
              attempts.emplace_back(row[3].c_str());
              if (ids.size() > 1) ids += ',', tokens += ',';
              ids += row[0].c_str();
              tokens += row[1].c_str();
            }
            if (shape == Raw::UnnestLocked) w.exec_prepared("lock_many", ids + "}", tokens + "}");
            w.exec_prepared("app_unnest", boxcar::pg_array(message_ids), boxcar::pg_array(attempts));
            w.exec_prepared("complete_many", ids + "}", tokens + "}");
            w.commit();
          } else {
            pqxx::work w(c);
            std::string ids = "{", tokens = "{";
            for (const auto& row : claimed) {
              w.exec_prepared("app", row[2].c_str(), row[3].as<int>());
              if (ids.size() > 1) ids += ',', tokens += ',';
              ids += row[0].c_str();
              tokens += row[1].c_str();
            }
            w.exec_prepared("complete_many", ids + "}", tokens + "}");
            w.commit();
          }
          done += claimed.size();
        }
      } catch (...) {
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
        failed = true;
      }
    });
  }
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return {.units = done.load(), .seconds = seconds_since(start)};
}

// What one drain costs the database per message: write transactions (xids assigned, each
// a commit that waits for its WAL flush) and WAL syncs (pg_stat_wal.wal_sync). Read around
// an untimed drain whose connections are all closed when it returns, so every backend has
// flushed its statistics; the two readings' own transactions are taken out.
struct PerMessageCost {
  double transactions = 0;
  double wal_syncs = 0;
};

PerMessageCost cost_of(const std::string& url, const std::function<Measurement()>& drain) {
  const auto read = [&] {
    pqxx::connection c(url);
    pqxx::nontransaction n(c);
    return std::pair{n.exec1("SELECT pg_catalog.pg_current_xact_id()::text::bigint")[0].as<double>(),
                     n.exec1("SELECT wal_sync FROM pg_catalog.pg_stat_wal")[0].as<double>()};
  };
  const auto before = read();
  const auto drained = static_cast<double>(drain().units);
  // A closing backend reports its statistics as it exits, just after the client saw the
  // connection close.
  std::this_thread::sleep_for(500ms);
  const auto after = read();
  return {.transactions = (after.first - before.first - 1) / drained,
          .wal_syncs = (after.second - before.second) / drained};
}

// `counts CASE raw|boxcar transactions T wal_syncs W` per message, for the case's two drains.
void print_costs(const std::string& name, const std::string& url, const std::function<void()>& prepare,
                 const std::function<Measurement()>& raw, const std::function<Measurement()>& worker) {
  for (const auto& [side, drain] : {std::pair{"raw", raw}, std::pair{"boxcar", worker}}) {
    prepare();
    const auto cost = cost_of(url, drain);
    std::cout << "counts " << name << " " << side << " transactions " << boxcar::bench::fixed(cost.transactions, 3)
              << " wal_syncs " << boxcar::bench::fixed(cost.wal_syncs, 3) << " per message\n";
  }
}

// accept() at a fixed offered rate while a Worker waits idle on LISTEN/NOTIFY; latency
// from accept() returning (the receipt committed) to the handler starting. The first
// `warm_up_seconds` at that rate are reported apart and left out of the percentiles: a
// new Worker's first message on each pooled connection waits for the connection to open
// and for the new backend to load the catalog entries of the statements' tables (about
// 10 ms per first parse here; docs/benchmarks.md, "The benchmarks"), a start-up cost
// that is not the steady state's wake-up path.
void measure_latency(const std::string& url, int rate, double warm_up_seconds, double seconds) {
  Admin(url).exec(std::string("TRUNCATE ") + kBoxcarSchema + ".inbox_receipts");
  const int warm_up = static_cast<int>(rate * warm_up_seconds);
  const int total = warm_up + static_cast<int>(rate * seconds);
  std::vector<Clock::time_point> accepted_at(static_cast<std::size_t>(total));
  std::vector<Clock::time_point> started_at(static_cast<std::size_t>(total));

  struct Recorder final : boxcar::InboxHandler {
    std::vector<Clock::time_point>& started;
    explicit Recorder(std::vector<Clock::time_point>& s) : started(s) {}
    void handle(const nlohmann::json& payload, boxcar::HandlerContext&) override {
      started[payload.at("i").get<std::size_t>()] = Clock::now();
    }
  };
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 8});
  boxcar::Inbox inbox(pool, {.schema = kBoxcarSchema, .consumers = {kConsumer}});
  boxcar::Worker worker(
      pool,
      {.schema = kBoxcarSchema,
       .consumers = {kConsumer},
       .concurrency = 4,
       .lease = 60s,
       .handler_timeout = 30s,
       .poll_interval = 1000ms},
      {{.consumer = kConsumer, .supports = {{"tick", 1}}, .handler = std::make_shared<Recorder>(started_at)}});
  worker.start();
  std::this_thread::sleep_for(300ms);
  const auto interval = std::chrono::nanoseconds(1'000'000'000 / rate);
  auto next = Clock::now();
  for (int i = 0; i < total; ++i) {
    std::this_thread::sleep_until(next);
    next += interval;
    inbox.accept({.scope = boxcar::Scope::global(),
                  .source = "latency",
                  .consumer = kConsumer,
                  .message_id = "l-" + std::to_string(i),
                  .event_type = "tick",
                  .schema_version = 1,
                  .payload = {{"i", i}}});
    accepted_at[static_cast<std::size_t>(i)] = Clock::now();
  }
  while (worker.stats().completed < static_cast<std::uint64_t>(total)) std::this_thread::sleep_for(5ms);
  worker.stop();
  const auto sorted_ms = [&](int from, int to) {
    std::vector<double> ms;
    for (int i = from; i < to; ++i)
      ms.push_back(std::chrono::duration<double, std::milli>(started_at[static_cast<std::size_t>(i)] -
                                                             accepted_at[static_cast<std::size_t>(i)])
                       .count());
    std::sort(ms.begin(), ms.end());
    return ms;
  };
  const auto pct = [](const std::vector<double>& ms, double p) {
    return ms[std::min(ms.size() - 1, static_cast<std::size_t>(p * ms.size()))];
  };
  const auto cold = sorted_ms(0, warm_up);
  const auto ms = sorted_ms(warm_up, total);
  std::cout << "\nlatency accept->handler start at " << rate << " msg/s offered, " << ms.size()
            << " messages after a warm-up of " << warm_up << " (NOTIFY wake-ups, poll fallback 1 s):\n"
            << std::fixed << std::setprecision(2) << "  p50 " << pct(ms, 0.50) << " ms   p90 " << pct(ms, 0.90)
            << " ms   p99 " << pct(ms, 0.99) << " ms   max " << ms.back() << " ms\n"
            << "  warm-up (a new Worker's connections; not in the line above): p50 " << pct(cold, 0.50) << " ms   p99 "
            << pct(cold, 0.99) << " ms   max " << cold.back() << " ms\n";
  std::cout << "latency p50_ms " << pct(ms, 0.50) << " 2.00\nlatency p99_ms " << pct(ms, 0.99) << " 10.00\n";
}

// Peak RSS of a Worker alone (16 threads, batch 32) draining kRssMessages, in a process of
// its own (bench/rss_probe.cpp): `rss worker_peak_mb VALUE 64`.
void measure_rss(const std::string& url) {
  constexpr int kRssMessages = 50000;
  constexpr const char* kRssSchema = "bench_worker_rss";
  Admin(url).exec(std::string("DROP SCHEMA IF EXISTS ") + kRssSchema + " CASCADE");
  boxcar::migrate(url, {.schema = kRssSchema});
  {
    auto pool = boxcar::ConnectionPool::create({.url = url, .size = 2});
    boxcar::Inbox inbox(pool, {.schema = kRssSchema, .consumers = {kConsumer}, .notify = false});
    std::vector<boxcar::AcceptRequest> batch;
    for (int i = 0; i < kRssMessages; ++i) {
      batch.push_back(message(i));
      if (batch.size() == 1000 || i + 1 == kRssMessages) {
        for (const auto& r : inbox.accept_many(batch)) r.rethrow_if_error();
        batch.clear();
      }
    }
  }
  const double mib =
      boxcar::bench::run_probe_peak_mib({BOXCAR_RSS_PROBE_PATH, "worker", "--database-url", url, "--schema", kRssSchema,
                                         "--consumer", kConsumer, "--messages", std::to_string(kRssMessages)});
  std::cout << "\npeak RSS of a worker process (16 threads, batch 32) draining " << kRssMessages << " messages, MiB:\n";
  boxcar::bench::print_rss_line("worker_peak_mb", mib, 64);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int messages = 20000;
    std::vector<std::string> only;
    std::vector<char*> rest{argv[0]};
    bool rounds_given = false;
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--rounds") rounds_given = true;
      if (std::string(argv[i]) == "--messages" && i + 1 < argc)
        messages = std::stoi(argv[++i]);
      else if (std::string(argv[i]) == "--case" && i + 1 < argc)
        only.emplace_back(argv[++i]);
      else
        rest.push_back(argv[i]);
    }
    const auto options = boxcar::bench::parse_options(static_cast<int>(rest.size()), rest.data());
    // Two rounds by default, so that the full set of cases fits a CI-sized run; a given
    // --rounds (at least 3) is honoured, for the medians of a noisy machine.
    const int rounds = rounds_given ? options.rounds : 2;
    const std::string& url = options.database_url;
    for (const char* schema : {kBoxcarSchema, kRawSchema}) {
      Admin(url).exec(std::string("DROP SCHEMA IF EXISTS ") + schema + " CASCADE");
      boxcar::migrate(url, {.schema = schema});
      Admin(url).exec(std::string("CREATE TABLE ") + schema +
                      ".app_rows (message_id text NOT NULL, attempt int NOT NULL)");
      // Autovacuum would wake at random moments inside one side's drain (20,000 claims
      // and completions leave 40,000 dead row versions, past its threshold), and more often
      // inside the slower side's; load() vacuums both tables before every measurement instead.
      for (const char* table : {".inbox_receipts", ".app_rows"})
        Admin(url).exec(std::string("ALTER TABLE ") + schema + table + " SET (autovacuum_enabled = off)");
    }
    std::cout << "bench_worker: drain " << messages << " accepted messages, handler inserts one row; " << rounds
              << " interleaved rounds per case, medians\n";
    const auto wanted = [&](const std::string& name) {
      return only.empty() || std::find(only.begin(), only.end(), name) != only.end();
    };
    std::vector<CaseResult> results;
    for (const bool batched : {false, true}) {
      for (const int threads : {1, 4, 16}) {
        const std::string name = std::string(batched ? "batched_t" : "per_message_t") + std::to_string(threads);
        if (!wanted(name)) continue;
        const auto prepare = [&] { load(url, messages); };
        const auto raw = [&] { return drain_raw(url, threads, batched); };
        const auto worker = [&] { return drain_boxcar(url, threads, messages, {.batch_size = batched ? kClaim : 1}); };
        results.push_back(boxcar::bench::compare(
            name, std::to_string(threads) + " threads, msg/s" + (batched ? ", batch 32 vs (b)" : " vs (a)"), rounds,
            prepare, raw, worker, std::cout));
        if (!batched) print_costs(name, url, prepare, raw, worker);
      }
    }
    // The other way to survive a failing handler in a batch, on the same footing.
    if (wanted("batched_savepoint_t16"))
      results.push_back(boxcar::bench::compare(
          "batched_savepoint_t16", "16 threads, msg/s, batch 32 (Savepoint mode) vs (b)", rounds,
          [&] { load(url, messages); }, [&] { return drain_raw(url, 16, true); },
          [&] {
            return drain_boxcar(url, 16, messages, {.batch_size = kClaim, .mode = boxcar::BatchFailureMode::Savepoint});
          },
          std::cout));
    // Batch handlers against the physical bound: claim 32, one unnest insert, one bulk
    // complete, commit (c).
    if (wanted("batch_handler_t16"))
      results.push_back(boxcar::bench::compare(
          "batch_handler_t16", "16 threads, msg/s, batch handler of 32 (one unnest insert) vs (c)", rounds,
          [&] { load(url, messages); }, [&] { return drain_raw(url, 16, true, Raw::Unnest); },
          [&] { return drain_boxcar(url, 16, messages, {.batch_size = kClaim, .batch_handler = true}); }, std::cout));
    // Diagnostic, only when named: batch_handler_t16 without the pool's session reset, to
    // show what that round trip costs a batch.
    if (std::find(only.begin(), only.end(), "batch_handler_noreset_t16") != only.end())
      results.push_back(boxcar::bench::compare(
          "batch_handler_noreset_t16", "16 threads, msg/s, batch handler of 32, no session reset, vs (c)", rounds,
          [&] { load(url, messages); }, [&] { return drain_raw(url, 16, true, Raw::Unnest); },
          [&] {
            return drain_boxcar(url, 16, messages,
                                {.batch_size = kClaim, .reset_sessions = false, .batch_handler = true});
          },
          std::cout));
    if (std::find(only.begin(), only.end(), "batch_handler_lockedraw_t16") != only.end())
      results.push_back(boxcar::bench::compare(
          "batch_handler_lockedraw_t16", "16 threads, msg/s, batch handler of 32 vs (c) + lock under tokens", rounds,
          [&] { load(url, messages); }, [&] { return drain_raw(url, 16, true, Raw::UnnestLocked); },
          [&] { return drain_boxcar(url, 16, messages, {.batch_size = kClaim, .batch_handler = true}); }, std::cout));
    // Diagnostics, only when named: per_message_t16's gap split into the guarantees' SQL
    // and the Worker's machinery (docs/benchmarks.md, "The per-message transaction").
    if (std::find(only.begin(), only.end(), "guarantee_sql_t16") != only.end())
      results.push_back(boxcar::bench::compare(
          "guarantee_sql_t16", "16 threads, msg/s, (a) with Boxcar's per-message statements vs (a)", rounds,
          [&] { load(url, messages); }, [&] { return drain_raw(url, 16, false); },
          [&] { return drain_raw(url, 16, false, Raw::GuaranteeSql); }, std::cout));
    if (std::find(only.begin(), only.end(), "worker_machinery_t16") != only.end())
      results.push_back(boxcar::bench::compare(
          "worker_machinery_t16", "16 threads, msg/s, Worker vs (a) with Boxcar's per-message statements", rounds,
          [&] { load(url, messages); }, [&] { return drain_raw(url, 16, false, Raw::GuaranteeSql); },
          [&] { return drain_boxcar(url, 16, messages, {}); }, std::cout));
    // What the pool's session reset costs: one more round trip per handler transaction.
    // Here the "baseline" is Boxcar itself with the reset turned off.
    if (wanted("session_reset_t16"))
      results.push_back(boxcar::bench::compare(
          "session_reset_t16", "16 threads, msg/s, batch 1, reset vs no reset", options.rounds,
          [&] { load(url, messages); }, [&] { return drain_boxcar(url, 16, messages, {.reset_sessions = false}); },
          [&] { return drain_boxcar(url, 16, messages, {}); }, std::cout));
    // What the tenant-fair claim (the default) costs where there is one tenant: batched_t16
    // against the same Worker with the oldest-due-first claim.
    if (wanted("fair_claims_t16"))
      results.push_back(boxcar::bench::compare(
          "fair_claims_t16", "16 threads, msg/s, batch 32, fair vs oldest-due claim", rounds,
          [&] { load(url, messages); },
          [&] { return drain_boxcar(url, 16, messages, {.batch_size = kClaim, .fair_claims = false}); },
          [&] { return drain_boxcar(url, 16, messages, {.batch_size = kClaim, .fair_claims = true}); }, std::cout));
    if (only.empty() || wanted("latency")) measure_latency(url, 500, 1.0, 6.0);
    std::cout << "\n";
    boxcar::bench::print_table(std::cout, results);
    std::cout << "\n";
    for (const auto& r : results) {
      if (r.name.starts_with("per_message_t")) boxcar::bench::print_ratio_line(std::cout, r, kTargetPerMessage);
      if (r.name == "batched_t16") boxcar::bench::print_ratio_line(std::cout, r, kTargetBatched);
      if (r.name == "session_reset_t16") boxcar::bench::print_ratio_line(std::cout, r, kTargetSessionReset);
      if (r.name == "fair_claims_t16") boxcar::bench::print_ratio_line(std::cout, r, kTargetFairClaims);
      if (r.name == "batch_handler_t16") boxcar::bench::print_ratio_line(std::cout, r, kTargetBatchHandler);
    }
    if (wanted("rss")) measure_rss(url);
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << e.what() << "\n" << boxcar::bench::usage(argv[0]);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_worker failed: " << e.what() << "\n";
    return 1;
  }
}
