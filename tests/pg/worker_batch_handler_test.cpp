// Batch handlers (InboxBatchHandler): one handle_batch() per transaction writing in bulk,
// one outcome per message, and every guarantee of single-message mode kept: exactly the
// messages reported completed complete, emits commit only with them, failures are charged
// only to their own message, and a stale claim commits nothing.
#include <catch2/catch.hpp>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "boxcar/core/pg_array.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "order_events.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

void accept_messages(const std::shared_ptr<ConnectionPool>& pool, const TestDatabase& db, int count) {
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < count; ++i) batch.push_back(message("c.v1", "m-" + std::to_string(i)));
  inbox.accept_many(batch);
}

// The bulk write of every test: the messages' app rows in one unnest insert.
void insert_app_rows(const std::string& table, std::span<const InboxMessage> messages, BatchContext& context) {
  std::vector<std::string> ids, attempts;
  for (const auto& m : messages) {
    ids.push_back(m.message_id);
    attempts.push_back(std::to_string(m.attempt));
  }
  context.tx.exec(
      "INSERT INTO " + table +
          " (message_id, attempt) SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int[]))",
      pg_array(ids), pg_array(attempts));
}

BatchOutcomes all_completed(std::span<const InboxMessage> messages) {
  return BatchOutcomes(messages.size(), MessageOutcome::completed());
}

WorkerOptions options(const TestDatabase& db, std::size_t batch_size = 10) {
  return {.schema = db.schema(),
          .consumers = {"c.v1"},
          .batch_size = batch_size,
          .lease = 5s,
          .handler_timeout = 3s,
          .max_attempts = 2,
          .backoff = {.base = 0ms, .cap = 0ms}};
}

double emitted_total(Metrics& metrics) {
  const std::string text = metrics.serialize();
  const std::string prefix = R"(boxcar_outbox_emitted_total{event_type="order.projected",topic="orders.projected"} )";
  const auto at = text.find(prefix);
  return at == std::string::npos ? 0.0 : std::stod(text.substr(at + prefix.size()));
}

}  // namespace

TEST_CASE("a batch handler's completed, retry and permanent outcomes produce exactly those statuses and attempts") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  auto metrics = std::make_shared<Metrics>();
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false, .metrics = metrics});
  accept_messages(pool, db, 6);
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};
  auto o = options(db);
  o.metrics = metrics;
  Worker worker(pool, o,
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    ++calls;
                    // Writes and emits for every message, failing ones included: the
                    // worker must keep none of the batch's writes when one fails.
                    insert_app_rows(table, messages, c);
                    BatchOutcomes outcomes;
                    for (const auto& m : messages) {
                      outbox.emit(c.tx, OrderProjected{m.message_id}, {.scope = m.scope});
                      if (m.message_id == "m-1" && m.attempt == 1) {
                        outcomes.push_back(MessageOutcome::retry("m-1 fails once", "Flaky"));
                      } else if (m.message_id == "m-2") {
                        outcomes.push_back(MessageOutcome::permanent("m-2 can never work"));
                      } else if (m.message_id == "m-4") {
                        outcomes.push_back(MessageOutcome::retry("m-4 always fails", "Broken"));
                      } else {
                        outcomes.push_back(MessageOutcome::completed());
                      }
                    }
                    return outcomes;
                  })}});
  worker.drain();

  // m-0, m-3, m-5 completed on their first attempt; m-1 on its second.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1 AND "
                  "finished_attempts = 1 AND message_id IN ('m-0', 'm-3', 'm-5')") == 3);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 2 AND "
                  "message_id = 'm-1'") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD' AND attempts = 1 AND "
                  "dead_reason = 'HANDLER_PERMANENT' AND last_error = 'm-2 can never work' AND message_id = 'm-2'") ==
        1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD' AND attempts = 2 AND "
                  "dead_reason = 'ATTEMPTS_EXHAUSTED' AND last_error_type = 'Broken' AND message_id = 'm-4'") == 1);
  // One app row and one outbox row per completed message, none for the failed ones.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 4);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id IN ('m-2', 'm-4')") == 0);
  CHECK(db.scalar("SELECT attempt FROM {schema}.app_rows WHERE message_id = 'm-1'") == 2);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE payload::jsonb ->> 'orderId' IN ('m-2', 'm-4')") ==
        0);
  CHECK(emitted_total(*metrics) == 4);
  const auto stats = worker.stats();
  CHECK(stats.completed == 4);
  CHECK(stats.dead == 2);
  CHECK(stats.handler_calls == static_cast<std::uint64_t>(calls.load()));
}

TEST_CASE("a batch handler that throws re-runs its messages one at a time through the per-message fallback") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 5);
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> fallback_calls{0};
  Worker worker(pool, options(db),
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++fallback_calls;
                    insert_app_row(table, c);
                    if (c.message_id == "m-3" && c.attempt == 1) throw std::runtime_error("m-3 fails once alone");
                  }),
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    insert_app_rows(table, messages, c);
                    throw std::runtime_error("the batch handler cannot do this batch");
                    return all_completed(messages);
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5);
  // Charged only for its own failure: m-3 alone; the batch's throw cost nobody an attempt.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE attempts = 1 AND message_id <> 'm-3'") == 4);
  CHECK(db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'm-3'") == 2);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 5);
  CHECK(fallback_calls >= 6);
}

TEST_CASE("without a fallback a batch handler that throws re-runs each message as a batch of one") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 5);
  const std::string table = db.qualified("{schema}.app_rows");
  std::mutex mutex;
  std::vector<std::size_t> sizes;
  Worker worker(pool, options(db),
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    {
                      std::lock_guard lock(mutex);
                      sizes.push_back(messages.size());
                    }
                    insert_app_rows(table, messages, c);
                    for (const auto& m : messages)
                      if (m.message_id == "m-3" && m.attempt == 1) throw std::runtime_error("m-3 breaks its batch");
                    return all_completed(messages);
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE attempts = 1 AND message_id <> 'm-3'") == 4);
  CHECK(db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'm-3'") == 2);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 5);
  REQUIRE(!sizes.empty());
  CHECK(sizes.front() == 5);
  CHECK(std::all_of(sizes.begin() + 1, sizes.end(), [](std::size_t n) { return n == 1; }));
}

TEST_CASE("a batch handler returning the wrong number of outcomes is treated like a throw") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 3);
  const std::string table = db.qualified("{schema}.app_rows");
  Worker worker(pool, options(db),
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    insert_app_rows(table, messages, c);
                    // Forgets the last message whenever there is more than one.
                    return BatchOutcomes(messages.size() == 1 ? 1 : messages.size() - 1, MessageOutcome::completed());
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1") == 3);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 3);
}

TEST_CASE("a batch handler's batch in which one claim went stale commits nothing of it") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 5);
  const std::string table = db.qualified("{schema}.app_rows");
  const std::string receipts = db.qualified("{schema}.inbox_receipts");
  std::atomic<int> calls{0};
  auto o = options(db);
  o.lease = 1500ms;
  o.handler_timeout = 500ms;
  Worker worker(pool, o,
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    insert_app_rows(table, messages, c);
                    // The first call takes m-2's claim over from inside, as a re-claimer would.
                    if (++calls == 1)
                      c.tx.exec("UPDATE " + receipts + " SET claim_token = gen_random_uuid() WHERE message_id = 'm-2'");
                    return all_completed(messages);
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-2'") == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-2' AND status = 'PROCESSING'") ==
        1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1") == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 4);
  CHECK(worker.stats().stale >= 1);

  std::this_thread::sleep_for(o.lease + 200ms);
  worker.drain();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 5);
}

TEST_CASE("a batch handler's transaction carries its deadline server-side, set by the statement that locks the batch") {
  TestDatabase db;
  auto pool = db.pool(6);
  accept_messages(pool, db, 3);
  auto o = options(db);
  o.handler_timeout = 20s;
  o.lease = 30s;
  std::vector<std::pair<long long, long long>> seen;
  Worker worker(pool, o,
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    seen.push_back(transaction_deadline_ms(c.tx));
                    return all_completed(messages);
                  })}});
  worker.drain();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 3);
  REQUIRE_FALSE(seen.empty());
  for (const auto& [statement_ms, idle_ms] : seen) {
    CHECK(statement_ms > 15000);
    CHECK(statement_ms <= 20000);
    CHECK(idle_ms == statement_ms + 500);
  }
}

TEST_CASE("a batch handler past its deadline commits nothing of the batch and its messages complete alone") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 4);
  const std::string table = db.qualified("{schema}.app_rows");
  auto o = options(db);
  o.handler_timeout = 1s;
  o.lease = 3s;
  Worker worker(pool, o,
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    insert_app_rows(table, messages, c);
                    // 300 ms a message, ignoring the signal: 4 do not fit 1 s, 1 does.
                    std::this_thread::sleep_for(300ms * static_cast<int>(messages.size()));
                    return all_completed(messages);
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1") == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE attempt = 1") == 4);
}

TEST_CASE("a batch handler that ends the worker's transaction makes every message of its batch DEAD") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  accept_messages(pool, db, 3);
  const std::string table = db.qualified("{schema}.app_rows");
  Worker worker(pool, options(db),
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    insert_app_rows(table, messages, c);
                    c.tx.exec("COMMIT");
                    return all_completed(messages);
                  })}});
  worker.drain();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD' AND "
                  "dead_reason = 'HANDLER_ENDED_TRANSACTION'") == 3);
  // Its own COMMIT made the rows durable; none was written a second time.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 3);
}

TEST_CASE("with worker.tenant_setting a batch handler gets one tenant's messages per call, with the setting set") {
  TestDatabase db;
  auto pool = db.pool(6);
  {
    Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
    std::vector<AcceptRequest> batch;
    for (int i = 0; i < 8; ++i) {
      auto request = message("c.v1", "m-" + std::to_string(i));
      request.scope = i % 2 == 0 ? Scope::tenant("even") : Scope::tenant("odd");
      if (i == 7) request.scope = Scope::global();
      batch.push_back(request);
    }
    inbox.accept_many(batch);
  }
  std::mutex mutex;
  std::vector<std::string> problems;
  std::atomic<int> calls{0};
  auto o = options(db);
  o.tenant_setting = "app.tenant_id";
  Worker worker(pool, o,
                {{.consumer = "c.v1",
                  .supports = {{"thing.happened", 1}},
                  .batch_handler = batch_handler([&](std::span<const InboxMessage> messages, BatchContext& c) {
                    ++calls;
                    const auto setting =
                        c.tx.exec("SELECT pg_catalog.current_setting('app.tenant_id')")[0][0].as<std::string>();
                    for (const auto& m : messages) {
                      const std::string expected = m.scope.kind == Scope::Kind::Global ? "" : m.scope.id;
                      if (setting != expected || !(m.scope == messages.front().scope)) {
                        std::lock_guard lock(mutex);
                        problems.push_back(m.message_id + " ran with tenant '" + setting + "'");
                      }
                    }
                    return all_completed(messages);
                  })}});
  worker.drain();

  CHECK(problems.empty());
  CHECK(calls == 3);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 8);
}

TEST_CASE("a registration without a handler or a batch handler is a ConfigError naming handlers") {
  TestDatabase db;
  auto pool = db.pool(6);
  try {
    Worker worker(pool, options(db), {{.consumer = "c.v1", .supports = {{"thing.happened", 1}}}});
    FAIL("expected ConfigError for handlers");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "handlers");
    CHECK(std::string(e.what()).find("batch_handler") != std::string::npos);
  }
}
