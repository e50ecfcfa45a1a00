// A handler that ignores its cancellation signal cannot capture the worker: at its
// deadline its thread is abandoned and replaced, its session is cut, lease recovery
// settles the receipt, and stop() still returns. Also: lease recovery runs however full
// the local queue is.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "boxcar/inbox/worker.hpp"
#include "exposition.hpp"
#include "stuck_handler.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "c.v1";

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = db.pool(6);
  Inbox inbox{pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = true}};
  std::string table = db.qualified("{schema}.app_rows");
  Setup() { create_app_table(db); }
  std::string status_of(const std::string& id) const {
    return db.query("SELECT status FROM {schema}.inbox_receipts WHERE message_id = '" + id + "'")[0][0]
        .as<std::string>();
  }
  std::int64_t count(const std::string& where) const {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE " + where);
  }
};

void run_with_stuck_handler(bool keep_querying) {
  Setup s;
  StuckHandler stuck{.keep_querying = keep_querying};
  std::atomic<int> arrived{0};
  std::atomic<bool> paired{false};
  auto body = handler([&, table = s.table](const nlohmann::json&, HandlerContext& c) {
    if (c.message_id == "stuck") return stuck.run(c, table);
    insert_app_row(table, c);
    // The first two normal messages wait for each other: only two live handler threads,
    // the replacement included, can run them side by side.
    if (arrived.fetch_add(1) < 2) {
      while (arrived.load() < 2 && !c.signal.cancelled()) std::this_thread::sleep_for(5ms);
      if (arrived.load() >= 2) paired = true;
    }
  });
  const std::weak_ptr<InboxHandler> handler_alive = body;
  auto metrics = std::make_shared<Metrics>();
  const WorkerOptions options{.schema = s.db.schema(),
                              .consumers = {kConsumer},
                              .concurrency = 2,
                              .lease = 2s,
                              .handler_timeout = 500ms,
                              .max_attempts = 1,
                              .backoff = {.base = 0ms, .cap = 0ms},
                              .poll_interval = 100ms,
                              .shutdown_grace = 1s,
                              .metrics = metrics};
  auto worker = std::make_unique<Worker>(
      s.pool, options,
      std::vector<HandlerRegistration>{{.consumer = kConsumer, .supports = {{"thing.happened", 1}}, .handler = body}});
  body.reset();
  s.inbox.accept(message(kConsumer, "stuck"));
  worker->start();
  REQUIRE(eventually([&] { return stuck.started.load(); }));
  REQUIRE(eventually([&] { return worker->abandoned_handlers() == 1; }));

  std::vector<AcceptRequest> normal;
  for (int i = 0; i < 20; ++i) normal.push_back(message(kConsumer, "m-" + std::to_string(i)));
  s.inbox.accept_many(normal);
  CHECK(eventually([&] { return s.count("message_id LIKE 'm-%' AND status = 'COMPLETED'") == 20; }));
  CHECK(paired);
  // The abandoned attempt's transaction was cut; its lease expired beside other messages,
  // so lease recovery gave the attempt back and the suspect lane re-ran it alone. There it
  // hung again and was abandoned again: that lease expired on a solo run, a crash strike
  // on its last attempt (max_attempts = 1), so it is DEAD, although its handler still runs.
  CHECK(eventually([&] { return s.status_of("stuck") == "DEAD"; }, 15s));
  CHECK(s.db.query("SELECT dead_reason FROM {schema}.inbox_receipts WHERE message_id = 'stuck'")[0][0]
            .as<std::string>() == "LEASE_EXPIRED_EXHAUSTED");
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'stuck'") == 0);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id LIKE 'm-%'") == 20);

  const auto stop_started = std::chrono::steady_clock::now();
  CHECK(s.db.scalar("SELECT crash_strikes FROM {schema}.inbox_receipts WHERE message_id = 'stuck'") == 1);
  worker->stop();
  CHECK(std::chrono::steady_clock::now() - stop_started < 10s);  // liveness bound: grace 1 s
  CHECK(worker->abandoned_handlers() == 2);
  CHECK(worker->stats().abandoned_handlers == 2);
  CHECK(metric_value(metrics->serialize(), "boxcar_worker_abandoned_handlers_total") == 2);
  CHECK(metric_value(metrics->serialize(), "boxcar_worker_crash_strikes_total", {{"consumer", kConsumer}}) == 1);

  // The abandoned thread still runs and still holds what it may touch after returning.
  worker.reset();
  CHECK_FALSE(handler_alive.expired());
  stuck.release = true;  // lets it return: it records nothing (the claim is gone) and ends
  CHECK(eventually([&] { return handler_alive.expired(); }));
  CHECK(s.status_of("stuck") == "DEAD");
  CHECK(s.pool->open_connections() <= s.pool->options().size);
}

}  // namespace

TEST_CASE(
    "a handler that ignores cancellation is abandoned at its deadline and replaced, the other messages "
    "complete and stop returns") {
  run_with_stuck_handler(false);
}

TEST_CASE(
    "an abandoned handler that keeps querying its aborted transaction has its session terminated, so lease "
    "recovery can settle the receipt") {
  run_with_stuck_handler(true);
}

TEST_CASE("lease recovery runs while the local queue is full") {
  Setup s;
  std::atomic<bool> release{false};
  std::atomic<int> running{0};
  Worker worker(s.pool,
                {.schema = s.db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 1,
                 // Local queue capacity max(2 x 1 x 4, 2 x claim_limit) = 8 (runs of 4 with
                 // batch_size 1), claims of at most 4.
                 .claim_limit = 4,
                 .lease = 30s,
                 .handler_timeout = 20s,
                 .max_attempts = 5,
                 .backoff = {.base = 0ms, .cap = 0ms},
                 .poll_interval = 100ms},
                {{.consumer = kConsumer,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&, table = s.table](const nlohmann::json&, HandlerContext& c) {
                    ++running;
                    while (!release && !c.signal.cancelled()) std::this_thread::sleep_for(5ms);
                    insert_app_row(table, c);
                  })}});
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < 20; ++i) batch.push_back(message(kConsumer, "m-" + std::to_string(i)));
  s.inbox.accept_many(batch);
  worker.start();
  // Two claims of 4 fill the queue; the thread takes one into the handler and three into its
  // run, and a claim of 4 refills the queue. The run goes back to the queue once the
  // handler has run for 100 ms: 11 queued, above the refill level, so 8 stay PENDING.
  REQUIRE(eventually([&] {
    return running.load() == 1 && s.count("status = 'PROCESSING'") == 12 && s.count("status = 'PENDING'") == 8;
  }));

  // Two receipts whose worker died: one whose solo run had started on its last attempt,
  // one claimed beside other messages.
  s.inbox.accept(message(kConsumer, "x-exhausted"));
  s.inbox.accept(message(kConsumer, "x-retry"));
  s.db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', claim_token = gen_random_uuid(), "
      "lease_expires_at = now() - interval '1 second', "
      "attempts = CASE message_id WHEN 'x-exhausted' THEN 5 ELSE 1 END, "
      "suspect = message_id = 'x-exhausted', "
      "solo_started_at = CASE message_id WHEN 'x-exhausted' THEN now() END "
      "WHERE message_id IN ('x-exhausted', 'x-retry')");
  CHECK(eventually([&] { return s.status_of("x-exhausted") == "DEAD"; }, 10s));
  CHECK(s.db.query("SELECT dead_reason FROM {schema}.inbox_receipts WHERE message_id = 'x-exhausted'")[0][0]
            .as<std::string>() == "LEASE_EXPIRED_EXHAUSTED");
  // Released as a suspect, its attempt given back, for whichever worker is idle; this one
  // is not yet.
  CHECK(eventually([&] { return s.status_of("x-retry") == "PENDING"; }, 10s));
  CHECK(s.db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'x-retry' AND suspect") == 0);
  CHECK(running.load() == 1);
  CHECK(worker.stats().lease_expired == 1);

  release = true;
  CHECK(eventually([&] { return s.count("status = 'COMPLETED'") == 21; }));
  CHECK(s.db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'x-retry'") == 1);
  worker.stop();
}
