// Real faults on the handler transaction: the worker's connection lost around the COMMIT
// that carries the handler's writes and the guarded completion. Whatever the worker could
// not learn, the receipt must end in one committed outcome: the handler's write present
// exactly once.
#include <catch2/catch.hpp>

#include <atomic>
#include <regex>
#include <thread>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/testing/tcp_proxy.hpp"
#include "exposition.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "orders.v1";

int port_of(const std::string& url) {
  std::smatch m;
  REQUIRE(std::regex_search(url, m, std::regex(R"(:(\d+)/)")));
  return std::stoi(m[1]);
}

// The worker's connections go through `proxy`; the test's own (accept, assertions) do not.
struct Setup {
  TestDatabase db;
  TcpProxy proxy{"127.0.0.1", port_of(db.url())};
  std::shared_ptr<ConnectionPool> worker_pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 3});
  Inbox inbox{db.pool(2), {.schema = db.schema(), .consumers = {kConsumer}, .notify = false}};
  std::string app_table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};

  Setup() { create_app_table(db); }

  // A worker whose handler writes one app row and, on its first call, arms `fault` so
  // that it hits the COMMIT of this very transaction.
  Worker worker(std::function<void()> fault) {
    return Worker(worker_pool,
                  {.schema = db.schema(),
                   .consumers = {kConsumer},
                   .owned_consumers = {kConsumer},
                   .concurrency = 1,
                   .lease = 2s,
                   .handler_timeout = 1s,
                   .max_attempts = 5,
                   .backoff = {.base = 0ms, .cap = 0ms},
                   .poll_interval = 100ms},
                  {{.consumer = kConsumer,
                    .supports = {{"thing.happened", 1}},
                    .handler = handler([this, fault](const nlohmann::json&, HandlerContext& c) {
                      insert_app_row(app_table, c);
                      if (++calls == 1) fault();
                    })}});
  }
  pqxx::row receipt() const {
    return db.query("SELECT status, attempts, claim_token IS NULL FROM {schema}.inbox_receipts")[0];
  }
};

}  // namespace

TEST_CASE("a handler transaction whose COMMIT landed but whose answer was lost completes once and is not re-run") {
  Setup s;
  s.inbox.accept(message(kConsumer, "m-1"));
  Worker worker = s.worker([&] { s.proxy.drop_response_to_commit(); });
  CHECK(worker.drain() == 1);
  CHECK(s.proxy.faults() == 1);
  CHECK(s.receipt()[0].as<std::string>() == "COMPLETED");
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-1'") == 1);
  CHECK(worker.stats().retried == 0);

  // Past the lease: nothing is left to recover, the handler does not run again.
  std::this_thread::sleep_for(2500ms);
  CHECK(worker.drain() == 0);
  CHECK(s.calls == 1);
  const auto row = s.receipt();
  CHECK(row[0].as<std::string>() == "COMPLETED");
  CHECK(row[1].as<int>() == 1);
  CHECK(row[2].as<bool>());
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
}

TEST_CASE(
    "a handler transaction whose COMMIT never reached the server is retried after its lease with no double write") {
  Setup s;
  s.inbox.accept(message(kConsumer, "m-1"));
  Worker worker = s.worker([&] { s.proxy.drop_request_of_commit(); });
  CHECK(worker.drain() == 1);
  CHECK(s.proxy.faults() == 1);
  // Rolled back with the lost connection: the write is gone, the claim waits for its lease.
  CHECK(s.receipt()[0].as<std::string>() == "PROCESSING");
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 0);

  const auto end = std::chrono::steady_clock::now() + 15s;
  while (s.receipt()[0].as<std::string>() != "COMPLETED" && std::chrono::steady_clock::now() < end) {
    worker.drain();  // recovers the claim once its lease expired
    std::this_thread::sleep_for(100ms);
  }
  const auto row = s.receipt();
  CHECK(row[0].as<std::string>() == "COMPLETED");
  // The lost attempt's lease expired outside a solo run: lease recovery gave its attempt
  // back and re-ran it alone as a suspect (docs/worker.md, attempt accounting).
  CHECK(row[1].as<int>() == 1);
  CHECK(s.calls == 2);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-1'") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE suspect AND crash_strikes = 0") == 1);
  CHECK(worker.stats().completed == 1);
}

namespace {

// The worker's connections go through a proxy that loses the connection on the next
// BEGIN, i.e. before any handler of the claim ran. max_attempts = 1: had the failure been
// charged as an attempt, the receipts would be DEAD (ATTEMPTS_EXHAUSTED).
void connection_lost_before_the_handler(std::size_t batch_size, int messages) {
  Setup s;
  for (int i = 0; i < messages; ++i) s.inbox.accept(message(kConsumer, "m-" + std::to_string(i)));
  auto metrics = std::make_shared<Metrics>();
  Worker worker(s.worker_pool,
                {.schema = s.db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 1,
                 .batch_size = batch_size,
                 .lease = 2s,
                 .handler_timeout = 1s,
                 .max_attempts = 1,
                 .backoff = {.base = 0ms, .cap = 0ms},
                 .poll_interval = 100ms,
                 .metrics = metrics},
                {{.consumer = kConsumer,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++s.calls;
                    insert_app_row(s.app_table, c);
                  })}});
  s.proxy.drop_request_of("BEGIN");
  worker.drain();  // gives the claims back unspent, claims them again and completes them
  CHECK(s.proxy.faults() == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1 "
                    "AND finished_attempts = 1") == messages);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == messages);
  CHECK(s.calls == messages);  // no handler ran on the lost connection
  CHECK(worker.stats().infrastructure_retries == static_cast<std::uint64_t>(messages));
  CHECK(worker.stats().retried == 0);
  CHECK(worker.stats().dead == 0);
  CHECK(metric_value(metrics->serialize(), "boxcar_worker_infrastructure_retries_total",
                     {{"consumer", kConsumer}, {"reason", "connection_lost"}}) == messages);
}

}  // namespace

TEST_CASE("a connection lost before the handler runs gives the claim back without spending an attempt") {
  connection_lost_before_the_handler(1, 1);
}

TEST_CASE("a batch whose connection is lost before any handler runs goes back without spending attempts") {
  connection_lost_before_the_handler(3, 3);
}

TEST_CASE("while the database is unreachable before the handler runs, attempts stay unspent until it returns") {
  Setup s;
  s.inbox.accept(message(kConsumer, "m-1"));
  std::atomic<bool> ran{false};
  Worker worker(s.worker_pool,
                {.schema = s.db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 1,
                 .lease = 2s,
                 .handler_timeout = 1s,
                 .max_attempts = 1,
                 .backoff = {.base = 50ms, .cap = 200ms},
                 .poll_interval = 100ms},
                {{.consumer = kConsumer,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ran = true;
                    insert_app_row(s.app_table, c);
                  })}});
  // Every BEGIN is lost for a while: each claim's transaction fails before the handler.
  std::atomic<bool> faulting{true};
  std::thread injector([&] {
    while (faulting) {
      s.proxy.drop_request_of("BEGIN");
      std::this_thread::sleep_for(5ms);
    }
  });
  worker.start();
  CHECK(eventually([&] { return s.proxy.faults() >= 3; }, 10s));
  CHECK_FALSE(ran);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 0);
  faulting = false;
  injector.join();
  CHECK(eventually([&] { return s.receipt()[0].as<std::string>() == "COMPLETED"; }, 10s));
  worker.stop();
  CHECK(s.receipt()[1].as<int>() == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
  CHECK(worker.stats().infrastructure_retries >= 3);
}

namespace {

// A handler whose statement fails the way a full disk fails it (SQLSTATE 53100 from the
// server), `failures` times in all, then succeeds; run in one mode or the other.
void disk_full_under_the_handler(std::size_t batch_size, BatchFailureMode mode) {
  Setup s;
  for (int i = 1; i <= 3; ++i) s.inbox.accept(message(kConsumer, "m-" + std::to_string(i)));
  std::atomic<int> failures_left{4};
  Worker worker(
      s.worker_pool,
      {.schema = s.db.schema(),
       .consumers = {kConsumer},
       .concurrency = 1,
       .batch_size = batch_size,
       .batch_failure_mode = mode,
       .lease = 3s,
       .handler_timeout = 1s,
       .max_attempts = 1,
       .backoff = {.base = 20ms, .cap = 100ms},
       .poll_interval = 50ms},
      {{.consumer = kConsumer,
        .supports = {{"thing.happened", 1}},
        .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
          insert_app_row(s.app_table, c);
          if (failures_left.fetch_sub(1) > 0)
            c.tx.exec("DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$");
        })}});
  worker.start();
  CHECK(eventually(
      [&] { return s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 3; },
      20s));
  worker.stop();
  // With max_attempts = 1, one charged failure would have made a receipt DEAD.
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 0);
  CHECK(s.db.scalar("SELECT max(attempts) FROM {schema}.inbox_receipts") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 3);
  CHECK(worker.stats().infrastructure_retries >= 1);
}

}  // namespace

TEST_CASE("a database out of disk under a running handler gives the claim back without spending an attempt") {
  disk_full_under_the_handler(1, BatchFailureMode::Rerun);
}

TEST_CASE("a database out of disk under a batch in savepoint mode charges none of its messages") {
  disk_full_under_the_handler(3, BatchFailureMode::Savepoint);
}
