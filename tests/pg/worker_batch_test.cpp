// Batched mode (batch_size > 1): many messages in one transaction, and a failing message
// neither loses the others' work nor leaves its own writes behind.
#include <catch2/catch.hpp>

#include "boxcar/inbox/worker.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

void run_batch_with_one_failure(BatchFailureMode mode) {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < 10; ++i) batch.push_back(message("c.v1", "m-" + std::to_string(i)));
  inbox.accept_many(batch);

  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .batch_size = 10,
                 .batch_failure_mode = mode,
                 .lease = 5s,
                 .handler_timeout = 3s,
                 .backoff = {.base = 0ms, .cap = 0ms}},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    insert_app_row(table, c);
                    if (c.message_id == "m-3" && c.attempt == 1) throw std::runtime_error("m-3 fails once");
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 10);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 10);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 10);
  // The failing message's first-attempt write was rolled back; its retry committed.
  CHECK(db.scalar("SELECT attempt FROM {schema}.app_rows WHERE message_id = 'm-3'") == 2);
  CHECK(db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'm-3'") == 2);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id <> 'm-3' AND attempts = 1") == 9);
  CHECK(worker.stats().completed == 10);
  CHECK(calls >= 11);
}

}  // namespace

TEST_CASE("batched mode with savepoints keeps the others' work when one handler fails") {
  run_batch_with_one_failure(BatchFailureMode::Savepoint);
}

TEST_CASE("batched mode with re-run falls back to one transaction per message when one handler fails") {
  run_batch_with_one_failure(BatchFailureMode::Rerun);
}

TEST_CASE("a batch that runs past its deadline commits nothing and every message retries") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(message("c.v1", "m-" + std::to_string(i)));
  inbox.accept_many(batch);
  const std::string table = db.qualified("{schema}.app_rows");
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .batch_size = 5,
                 .lease = 3s,
                 .handler_timeout = 300ms,
                 .backoff = {.base = 0ms, .cap = 0ms}},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    if (c.attempt == 1) std::this_thread::sleep_for(100ms);  // 5 x 100 ms > 300 ms
                  })}});
  worker.drain();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE attempt = 2") == 5);
}
