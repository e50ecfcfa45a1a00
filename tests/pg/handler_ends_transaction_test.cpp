// A handler cannot end the worker's transaction behind its back. context.tx has no
// commit() (tests/unit/tx_view_test.cpp); a raw exec("COMMIT") still reaches the server,
// and libpqxx 6.4 then carries on in autocommit, where the completion would commit on its
// own. The worker notices and the receipt goes DEAD (HANDLER_ENDED_TRANSACTION): never a
// silent COMPLETED, never a retry that repeats writes which are already durable.
#include <catch2/catch.hpp>

#include "boxcar/inbox/worker.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

WorkerOptions options_for(const TestDatabase& db, std::size_t batch_size, BatchFailureMode mode) {
  return {.schema = db.schema(),
          .consumers = {"c.v1"},
          .batch_size = batch_size,
          .batch_failure_mode = mode,
          .lease = 5s,
          .handler_timeout = 3s,
          .max_attempts = 5,
          .backoff = {.base = 0ms, .cap = 0ms}};
}

std::string receipt_field(const TestDatabase& db, const std::string& message_id, const std::string& column) {
  const auto rows = db.query("SELECT coalesce(" + column +
                             "::text, '') FROM {schema}.inbox_receipts WHERE message_id = '" + message_id + "'");
  return rows.empty() ? "" : rows[0][0].as<std::string>();
}

}  // namespace

TEST_CASE("a handler that ends its transaction with a raw statement leaves its receipt DEAD, never COMPLETED") {
  const std::string ender = GENERATE(as<std::string>{}, "COMMIT", "ROLLBACK", "END", "COMMIT AND CHAIN");
  CAPTURE(ender);
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  inbox.accept(message("c.v1", "m-1"));
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};
  Worker worker(pool, options_for(db, 1, BatchFailureMode::Rerun),
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    insert_app_row(table, c);
                    c.tx.exec(ender);
                  })}});
  worker.drain();

  CHECK(receipt_field(db, "m-1", "status") == "DEAD");
  CHECK(receipt_field(db, "m-1", "dead_reason") == "HANDLER_ENDED_TRANSACTION");
  CHECK(receipt_field(db, "m-1", "last_error_type") == "HandlerEndedTransaction");
  CHECK(calls == 1);  // not retried: a retry would repeat writes that may be durable
  CHECK(worker.stats().completed == 0);
  CHECK(worker.stats().dead == 1);
  if (ender != "ROLLBACK") {
    // Committed behind the worker's back: durable, once. DEAD is the operator's signal.
    CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
  }
}

TEST_CASE("a handler that commits and then fails goes DEAD instead of being retried") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  inbox.accept(message("c.v1", "m-1"));
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};
  Worker worker(pool, options_for(db, 1, BatchFailureMode::Rerun),
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    insert_app_row(table, c);
                    c.tx.exec("COMMIT");
                    throw std::runtime_error("failed after committing");
                  })}});
  worker.drain();

  CHECK(receipt_field(db, "m-1", "status") == "DEAD");
  CHECK(receipt_field(db, "m-1", "dead_reason") == "HANDLER_ENDED_TRANSACTION");
  CHECK_THAT(receipt_field(db, "m-1", "last_error"), Catch::Contains("failed after committing"));
  CHECK(calls == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
}

TEST_CASE("in batched mode a handler that commits the shared transaction leaves no receipt of it COMPLETED") {
  const auto mode = GENERATE(BatchFailureMode::Rerun, BatchFailureMode::Savepoint);
  CAPTURE(mode == BatchFailureMode::Rerun ? "rerun" : "savepoint");
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(message("c.v1", "m-" + std::to_string(i)));
  inbox.accept_many(batch);
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> guilty_calls{0};
  Worker worker(pool, options_for(db, 5, mode),
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    if (c.message_id == "m-2") {
                      ++guilty_calls;
                      c.tx.exec("COMMIT");
                    }
                  })}});
  worker.drain();

  CHECK(receipt_field(db, "m-2", "status") == "DEAD");
  CHECK(receipt_field(db, "m-2", "dead_reason") == "HANDLER_ENDED_TRANSACTION");
  CHECK(guilty_calls == 1);
  // Every handler that ran in the ended transaction wrote durably without a completion:
  // its receipt is DEAD with the same reason. Handlers that had not run yet (savepoint
  // mode stops at the next savepoint) are re-run normally and complete.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD' "
                  "AND dead_reason = 'HANDLER_ENDED_TRANSACTION'") +
            db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") ==
        5);
  if (mode == BatchFailureMode::Rerun)
    CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 5);
  // No write was repeated: one app row per message.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 5);
}
