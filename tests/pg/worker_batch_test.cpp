// Batched mode (batch_size > 1): many messages in one transaction, and a failing message
// neither loses the others' work nor leaves its own writes behind.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "order_events.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

// Accepts m-0 .. m-<count - 1> for consumer c.v1 in one accept_many.
void accept_messages(const std::shared_ptr<ConnectionPool>& pool, const TestDatabase& db, int count) {
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < count; ++i) batch.push_back(message("c.v1", "m-" + std::to_string(i)));
  inbox.accept_many(batch);
}

void run_batch_with_one_failure(BatchFailureMode mode) {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 10);

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

double emitted_total(Metrics& metrics) {
  const std::string text = metrics.serialize();
  const std::string prefix = R"(boxcar_outbox_emitted_total{event_type="order.projected",topic="orders.projected"} )";
  const auto at = text.find(prefix);
  return at == std::string::npos ? 0.0 : std::stod(text.substr(at + prefix.size()));
}

}  // namespace

TEST_CASE("batched mode with savepoints keeps the others' work when one handler fails") {
  run_batch_with_one_failure(BatchFailureMode::Savepoint);
}

TEST_CASE("batched mode with re-run falls back to one transaction per message when one handler fails") {
  run_batch_with_one_failure(BatchFailureMode::Rerun);
}

TEST_CASE(
    "a batch that runs past its deadline commits nothing of it and re-runs each message alone, charging none that "
    "completes alone") {
  const auto mode = GENERATE(BatchFailureMode::Rerun, BatchFailureMode::Savepoint);
  CAPTURE(mode == BatchFailureMode::Rerun ? "rerun" : "savepoint");
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 5);
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};
  // 5 x 300 ms does not fit the 1 s deadline as one batch; each message fits it alone.
  // A second handler thread is idle, and the dispatcher recovers expired leases every
  // 100 ms: a lease of 2 s that ran out while a message waited for its turn after the
  // batch would show as a second attempt.
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .concurrency = 2,
                 .batch_size = 5,
                 .batch_failure_mode = mode,
                 .lease = 2s,
                 .handler_timeout = 1s,
                 .max_attempts = 3,
                 .backoff = {.base = 0ms, .cap = 0ms},
                 .poll_interval = 100ms},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    std::this_thread::sleep_for(300ms);  // ignores the signal, as slow work does
                    insert_app_row(table, c);
                  })}});
  worker.start();
  // Until every receipt reached an end state (all DEAD, charged on every try, before).
  CHECK(eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status IN ('COMPLETED', 'DEAD')") == 5;
      },
      30s));
  worker.stop();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5);
  // Charged once each (the claim), for the one attempt that completed: the batch's
  // deadline was charged to none of them, and no lease ran out while one waited.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE attempts = 1 AND finished_attempts = 1") == 5);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE attempt = 1") == 5);
  // The batch stopped at its deadline instead of calling the handlers after it.
  CHECK(calls <= 4 + 5);
}

TEST_CASE(
    "in savepoint mode a deferred foreign key one message violates at COMMIT charges only that message: the batch "
    "re-runs one message at a time") {
  TestDatabase db;
  create_app_table(db);
  db.execute("CREATE TABLE {schema}.parents (id text PRIMARY KEY)");
  db.execute(
      "CREATE TABLE {schema}.children (id text PRIMARY KEY, "
      "parent_id text NOT NULL REFERENCES {schema}.parents (id) DEFERRABLE INITIALLY DEFERRED)");
  auto pool = db.pool(6);
  accept_messages(pool, db, 5);
  const std::string table = db.qualified("{schema}.app_rows");
  const std::string children = db.qualified("{schema}.children");
  const std::string parents = db.qualified("{schema}.parents");
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .batch_size = 5,
                 .batch_failure_mode = BatchFailureMode::Savepoint,
                 .lease = 5s,
                 .handler_timeout = 3s,
                 .max_attempts = 2,
                 .backoff = {.base = 0ms, .cap = 0ms}},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    // Every message adds its parent and a child of it, except m-2, whose
                    // child names a parent nobody adds: checked only at COMMIT.
                    if (c.message_id != "m-2") c.tx.exec("INSERT INTO " + parents + " (id) VALUES ($1)", c.message_id);
                    c.tx.exec("INSERT INTO " + children + " (id, parent_id) VALUES ($1, $1)", c.message_id);
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1") == 4);
  const auto row = db.query(
      "SELECT status, attempts, dead_reason, last_error FROM {schema}.inbox_receipts WHERE message_id = 'm-2'")[0];
  CHECK(row[0].as<std::string>() == "DEAD");
  CHECK(row[1].as<int>() == 2);
  CHECK(row[2].as<std::string>() == "ATTEMPTS_EXHAUSTED");
  CHECK_THAT(row[3].as<std::string>(), Catch::Contains("foreign key"));
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.children") == 4);
  CHECK(worker.stats().completed == 4);
  CHECK(worker.stats().dead == 1);
}

TEST_CASE("in a batch that runs past its deadline only the message too slow alone is charged and ends DEAD") {
  const auto mode = GENERATE(BatchFailureMode::Rerun, BatchFailureMode::Savepoint);
  CAPTURE(mode == BatchFailureMode::Rerun ? "rerun" : "savepoint");
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 5);
  const std::string table = db.qualified("{schema}.app_rows");
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .batch_size = 5,
                 .batch_failure_mode = mode,
                 .lease = 3s,
                 .handler_timeout = 1s,
                 .max_attempts = 2,
                 .backoff = {.base = 0ms, .cap = 0ms}},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    // m-2 misses the deadline even alone; the others fit it alone.
                    std::this_thread::sleep_for(c.message_id == "m-2" ? 1300ms : 200ms);
                    insert_app_row(table, c);
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1") == 4);
  const auto row = db.query(
      "SELECT status, coalesce(dead_reason, ''), last_error_type, attempts, finished_attempts "
      "FROM {schema}.inbox_receipts WHERE message_id = 'm-2'")[0];
  CHECK(row[0].as<std::string>() == "DEAD");
  CHECK(row[1].as<std::string>() == "ATTEMPTS_EXHAUSTED");
  CHECK(row[2].as<std::string>() == "HandlerTimeout");
  CHECK(row[3].as<int>() == 2);
  CHECK(row[4].as<int>() == 2);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-2'") == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 4);
}

TEST_CASE("in savepoint mode a handler rolled back to its savepoint leaves no after-commit effect of its emits") {
  TestDatabase db;
  auto pool = db.pool(6);
  auto metrics = std::make_shared<Metrics>();
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false, .metrics = metrics});
  accept_messages(pool, db, 5);
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .batch_size = 5,
                 .batch_failure_mode = BatchFailureMode::Savepoint,
                 .lease = 5s,
                 .handler_timeout = 3s,
                 .backoff = {.base = 0ms, .cap = 0ms}},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    outbox.emit(c.tx, OrderProjected{c.message_id}, {.scope = c.scope});
                    if (c.message_id == "m-3" && c.attempt == 1) throw std::runtime_error("m-3 fails once");
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5);
  // Four emits committed with the batch and one with m-3's retry; the emit rolled back
  // to m-3's savepoint is neither stored nor counted.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 5);
  CHECK(emitted_total(*metrics) == 5);
}

TEST_CASE("a batch in which one completion guard matches no row commits nothing, and its messages are retried") {
  const auto mode = GENERATE(BatchFailureMode::Rerun, BatchFailureMode::Savepoint);
  CAPTURE(mode == BatchFailureMode::Rerun ? "rerun" : "savepoint");
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 5);
  const std::string table = db.qualified("{schema}.app_rows");
  const std::string receipts = db.qualified("{schema}.inbox_receipts");
  const auto lease = 1500ms;
  std::atomic<int> m2_runs{0};
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .batch_size = 5,
                 .batch_failure_mode = mode,
                 .lease = lease,
                 .handler_timeout = 500ms,
                 .backoff = {.base = 0ms, .cap = 0ms}},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    // The worker's row lock keeps real re-claimers out while the batch
                    // runs, so the claim is taken over from inside: m-2's first run
                    // replaces its claim token as a re-claimer would.
                    if (c.message_id == "m-2" && ++m2_runs == 1)
                      c.tx.exec("UPDATE " + receipts + " SET claim_token = gen_random_uuid() WHERE message_id = $1",
                                c.message_id);
                  })}});
  worker.drain();

  // Nothing of the stale attempt committed: no row of m-2, whose claim (the token
  // change rolled back with the batch) waits for its lease to expire. The others were
  // re-run one per transaction and completed.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-2'") == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-2' AND status = 'PROCESSING'") ==
        1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 4);
  CHECK(worker.stats().stale >= 1);

  std::this_thread::sleep_for(lease + 200ms);
  worker.drain();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 5);
  // Its stale claim expired outside a solo run, so its attempt was given back.
  CHECK(db.scalar("SELECT attempt FROM {schema}.app_rows WHERE message_id = 'm-2'") == 1);
  CHECK(m2_runs == 2);
}

TEST_CASE("the thread of a batch abandoned past its deadline re-runs none of the batch once its handler returns") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  inbox.accept(message("c.v1", "stuck"));
  inbox.accept(message("c.v1", "m-1"));
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<bool> started{false};
  std::atomic<bool> release{false};
  std::atomic<int> first_attempt_calls{0};
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"c.v1"},
                 .concurrency = 1,
                 .batch_size = 2,
                 .lease = 5s,
                 .handler_timeout = 500ms,
                 .max_attempts = 3,
                 .backoff = {.base = 0ms, .cap = 0ms},
                 .poll_interval = 100ms},
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    if (c.message_id != "stuck") return insert_app_row(table, c);
                    if (c.attempt == 1) ++first_attempt_calls;
                    insert_app_row(table, c);
                    started = true;
                    while (!release) std::this_thread::sleep_for(5ms);  // ignores its signal
                  })}});
  worker.start();
  REQUIRE(eventually([&] { return started.load(); }));
  REQUIRE(eventually([&] { return worker.abandoned_handlers() == 1; }));
  // Returning now, well inside the lease, the abandoned thread could still run the batch
  // again one message at a time: it must not, it is no longer the worker's.
  release = true;
  CHECK(eventually(
      [&] { return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 2; }));
  worker.stop();
  CHECK(first_attempt_calls == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'stuck'") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'stuck' AND attempt = 1") == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-1'") == 1);
}

TEST_CASE("a batched worker needs a lease of one transaction's deadline plus 1 s, whatever its batch size") {
  TestDatabase db;
  auto pool = db.pool(6);
  const auto construct_worker = [&](std::chrono::milliseconds lease) {
    Worker worker(pool,
                  {.schema = db.schema(),
                   .consumers = {"c.v1"},
                   .concurrency = 2,
                   .batch_size = 32,
                   .lease = lease,
                   .handler_timeout = 2s},
                  {{.consumer = "c.v1",
                    .supports = {{"thing.happened", 1}},
                    .handler = handler([](const nlohmann::json&, HandlerContext&) {})}});
  };
  // Re-run batches renew the waiting leases, so 33 deadlines (the batch and 32 singles)
  // need not fit in one lease (docs/worker.md, "How long a claim is held").
  CHECK_NOTHROW(construct_worker(3s));
  try {
    construct_worker(2999ms);
    FAIL("expected ConfigError for worker.lease_ms");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "worker.lease_ms");
    CHECK(std::string(e.what()).find("worker.handler_timeout_ms") != std::string::npos);
  }
}
