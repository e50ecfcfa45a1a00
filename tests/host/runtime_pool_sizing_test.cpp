// A handler that borrows a second pooled connection (runtime.inbox().accept while its own
// transaction holds one) cannot deadlock the runtime's pool: the runtime refuses a pool
// without a connection to spare beyond the handler threads, and at the smallest pool it
// accepts, every handler at once in a nested accept still completes.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "boxcar/runtime/runtime.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

RuntimeConfig worker_config(const TestDatabase& db, std::size_t pool_size, std::size_t concurrency) {
  RuntimeConfig c;
  c.pool.url = db.url();
  c.pool.size = pool_size;
  c.pool.acquire_timeout = 2s;  // a pool deadlock would surface as failed, retried attempts
  c.schema = db.schema();
  c.consumers = {"orders.v1", "audit.v1"};
  c.worker.owned_consumers = {"orders.v1"};  // audit.v1 receipts are only accepted, never handled
  c.worker.concurrency = concurrency;
  c.worker.max_attempts = 5;
  c.worker.poll_interval = 100ms;
  c.worker.lease = 10s;
  c.worker.handler_timeout = 5s;
  c.backlog.interval = 60s;
  c.http.listen = "";  // no HTTP server needed
  return c;
}

}  // namespace

TEST_CASE("the runtime refuses a pool no larger than the worker's concurrency, naming both keys") {
  TestDatabase db;
  Runtime runtime(worker_config(db, 4, 4));
  runtime.inbox().accept(message("orders.v1", "m-1"));
  try {
    runtime.start(Role::Worker, {{.consumer = "orders.v1",
                                  .supports = {{"thing.happened", 1}},
                                  .handler = handler([](const nlohmann::json&, HandlerContext&) {})}});
    FAIL("expected ConfigError for pool.size");
  } catch (const ConfigError& e) {
    CHECK(e.code() == "CONFIG_INVALID");
    CHECK(e.key() == "pool.size");
    CHECK(std::string(e.what()).find("worker.concurrency + 1 (5)") != std::string::npos);
    CHECK(std::string(e.what()).find("runtime.inbox().accept()") != std::string::npos);
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING'") == 1);
}

TEST_CASE("handlers that all accept through the runtime at once complete at the smallest pool it allows") {
  TestDatabase db;
  create_app_table(db);
  constexpr std::size_t kConcurrency = 3;
  Runtime runtime(worker_config(db, kConcurrency + 1, kConcurrency));
  const std::string table = db.qualified("{schema}.app_rows");
  constexpr int kMessages = 24;
  for (int i = 0; i < kMessages; ++i) runtime.inbox().accept(message("orders.v1", "m-" + std::to_string(i)));

  std::atomic<std::size_t> holding{0};
  runtime.start(Role::Worker, {{.consumer = "orders.v1",
                                .supports = {{"thing.happened", 1}},
                                .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                                  insert_app_row(table, c);
                                  // Let every handler thread hold its transaction's connection before any
                                  // of them asks the pool for a second one (bounded: only makes the overlap likely).
                                  ++holding;
                                  const auto until = std::chrono::steady_clock::now() + 1s;
                                  while (holding.load() < kConcurrency && std::chrono::steady_clock::now() < until)
                                    std::this_thread::sleep_for(1ms);
                                  runtime.inbox().accept(message("audit.v1", "follow-up-" + c.message_id));
                                  --holding;
                                })}});
  const bool drained = eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM {schema}.inbox_receipts WHERE consumer = 'orders.v1' "
                   "AND status = 'COMPLETED'") == kMessages;
      },
      60s);
  runtime.stop();
  CHECK(drained);
  // No attempt failed on a pool timeout: each message ran once and wrote once.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE consumer = 'orders.v1' AND attempts = 1") ==
        kMessages);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == kMessages);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE consumer = 'audit.v1'") == kMessages);
}
