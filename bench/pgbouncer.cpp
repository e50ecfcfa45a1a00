// bench_pgbouncer: what running behind Debian's pgbouncer (1.18) costs the whole pipeline,
// as a ratio to direct connections measured in the same run.
//
//   scripts/bench pgbouncer [--rounds N] [--messages M]
//
// One measurement: M messages accepted (accept_many, 500 per call) into a fresh schema
// while a Worker (8 handler threads, one transaction per message: one application row
// and one outbox event) and a Publisher (to the librdkafka mock cluster over TCP) run;
// the clock stops when the publisher has delivered all M. Cases:
//   session_pooling      through pgbouncer pool_mode = session vs direct
//   transaction_pooling  through pgbouncer pool_mode = transaction (LISTEN direct through
//                        PoolOptions::session_url, named statements unprepared) vs direct
//   unprepared_direct    direct with PoolOptions::prepared_statements = false vs direct:
//                        the share of transaction_pooling's cost that is parsing alone
// Both sides of a case use the same settings otherwise; the direct side keeps prepared
// statements. The last lines are `ratio CASE VALUE TARGET` (target 0.50: informational).
#include <chrono>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "boxcar/core/migrate.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "boxcar/testing/pgbouncer.hpp"
#include "harness.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using boxcar::bench::CaseResult;
using boxcar::bench::Measurement;
using Clock = std::chrono::steady_clock;

constexpr const char* kSchema = "bench_pgbouncer";
constexpr const char* kConsumer = "bench.v1";
constexpr const char* kTopic = "bench.projected";
constexpr std::size_t kBatch = 500;
constexpr std::size_t kHandlers = 8;
constexpr double kTarget = 0.50;

boxcar::AcceptRequest message(int i) {
  return {.scope = boxcar::Scope::tenant("tenant-1"),
          .source = "bench",
          .consumer = kConsumer,
          .message_id = "m-" + std::to_string(i),
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", "o-" + std::to_string(i)}}};
}

class ProjectAndEmit final : public boxcar::InboxHandler {
 public:
  explicit ProjectAndEmit(boxcar::OutboxEmitter& outbox)
      : outbox_(outbox), sql_(std::string("INSERT INTO ") + kSchema + ".app_rows (message_id) VALUES ($1)") {}
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    context.tx.exec(sql_, context.message_id);
    outbox_.emit(context.tx,
                 boxcar::OutboxMessage{
                     .event_type = "order.projected", .schema_version = 1, .topic = kTopic, .payload = payload},
                 {.scope = context.scope, .causation_id = context.message_id});
  }

 private:
  boxcar::OutboxEmitter& outbox_;
  std::string sql_;
};

// A fresh schema each measurement, so every one starts from the same empty tables.
void reset_schema(const std::string& direct_url) {
  Admin admin(direct_url);
  admin.exec(std::string("DROP SCHEMA IF EXISTS ") + kSchema + " CASCADE");
  boxcar::migrate(direct_url, {.schema = kSchema});
  admin.exec(std::string("CREATE TABLE ") + kSchema + ".app_rows (message_id text NOT NULL)");
  admin.checkpoint();
}

Measurement pipeline(const boxcar::PoolOptions& pool_options, const std::string& bootstrap, int count) {
  auto pool = boxcar::ConnectionPool::create(pool_options);
  boxcar::Inbox inbox(pool, {.schema = kSchema, .consumers = {kConsumer}});
  boxcar::OutboxEmitter outbox(pool, {.schema = kSchema});
  boxcar::Worker worker(pool,
                        {.schema = kSchema,
                         .consumers = {kConsumer},
                         .concurrency = kHandlers,
                         .lease = 60s,
                         .handler_timeout = 30s,
                         .poll_interval = 100ms},
                        {{.consumer = kConsumer,
                          .supports = {{"order.created", 1}},
                          .handler = std::make_shared<ProjectAndEmit>(outbox)}});
  boxcar::Publisher publisher(pool,
                              {.schema = kSchema, .kafka = {{"bootstrap.servers", bootstrap}}, .poll_interval = 100ms});
  std::vector<boxcar::AcceptRequest> requests;
  for (int i = 0; i < count; ++i) requests.push_back(message(i));
  worker.start();
  publisher.start();
  const auto start = Clock::now();
  for (std::size_t first = 0; first < requests.size(); first += kBatch)
    for (const auto& r :
         inbox.accept_many(std::span(requests).subspan(first, std::min(kBatch, requests.size() - first))))
      r.rethrow_if_error();
  const auto deadline = start + 300s;
  while (publisher.stats().delivered < static_cast<std::uint64_t>(count)) {
    if (Clock::now() > deadline) throw std::runtime_error("the pipeline did not deliver every message within 300 s");
    std::this_thread::sleep_for(2ms);
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  worker.stop();
  publisher.stop();
  return {.units = static_cast<std::uint64_t>(count), .seconds = elapsed};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    int messages = 5000;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
      if (std::string(argv[i]) == "--messages" && i + 1 < argc)
        messages = std::stoi(argv[++i]);
      else
        rest.push_back(argv[i]);
    }
    spdlog::set_level(spdlog::level::warn);  // the workers' start/stop lines would bury the rounds
    const auto options = boxcar::bench::parse_options(static_cast<int>(rest.size()), rest.data());
    const std::string& url = options.database_url;
    if (!boxcar::testing::PgBouncer::available()) throw std::runtime_error("no /usr/sbin/pgbouncer: run scripts/setup");
    boxcar::testing::MockKafka kafka(1);
    kafka.create_topic(kTopic, 4);
    const std::size_t pool_size = kHandlers + 4;
    const boxcar::PoolOptions direct{.url = url, .size = pool_size};
    std::cout << "bench_pgbouncer: " << messages << " messages accepted, handled (" << kHandlers
              << " threads, one row and one event each) and published per measurement; " << options.rounds
              << " interleaved rounds per case, medians (baseline: direct connections)\n";
    std::vector<CaseResult> results;
    for (const std::string mode : {"session", "transaction"}) {
      boxcar::testing::PgBouncer bouncer(url, {.pool_mode = mode, .pool_size = static_cast<int>(pool_size) + 8});
      boxcar::PoolOptions through = direct;
      through.url = bouncer.route(url);
      if (mode == "transaction") {
        through.session_url = url;  // LISTEN direct
        through.prepared_statements = false;
      }
      results.push_back(boxcar::bench::compare(
          mode + "_pooling", "msg/s end to end, pgbouncer pool_mode = " + mode + " vs direct", options.rounds,
          [&] { reset_schema(url); }, [&] { return pipeline(direct, kafka.bootstrap_servers(), messages); },
          [&] { return pipeline(through, kafka.bootstrap_servers(), messages); }, std::cout));
    }
    boxcar::PoolOptions unprepared = direct;
    unprepared.prepared_statements = false;
    results.push_back(boxcar::bench::compare(
        "unprepared_direct", "msg/s end to end, direct: unnamed statements vs prepared", options.rounds,
        [&] { reset_schema(url); }, [&] { return pipeline(direct, kafka.bootstrap_servers(), messages); },
        [&] { return pipeline(unprepared, kafka.bootstrap_servers(), messages); }, std::cout));
    std::cout << "\n";
    boxcar::bench::print_table(std::cout, results);
    std::cout << "\n";
    for (const auto& r : results) boxcar::bench::print_ratio_line(std::cout, r, kTarget);
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << "bench_pgbouncer: " << e.what() << "\nusage: bench_pgbouncer --database-url URL [--rounds N] "
              << "[--messages M]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_pgbouncer: " << e.what() << "\n";
    return 1;
  }
}
