#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "boxcar/inbox/worker.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kOrders = "orders.v1";
const std::string kAudit = "audit.v1";

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool;
  Inbox inbox;
  std::string app_table;
  Setup()
      : pool(db.pool(12)),
        inbox(pool, {.schema = db.schema(), .consumers = {kOrders, kAudit}, .notify = true}),
        app_table(db.qualified("{schema}.app_rows")) {
    create_app_table(db);
  }
  // Owns kOrders only: most tests register just its handler (kAudit, declared without
  // one, would fail startup under the default of owning every declared consumer).
  WorkerOptions options() const {
    return {.schema = db.schema(),
            .consumers = {kOrders, kAudit},
            .owned_consumers = {kOrders},
            .lease = 5s,
            .handler_timeout = 2s,
            .max_attempts = 5,
            .backoff = {.base = 0ms, .cap = 0ms},
            .poll_interval = 100ms};
  }
  HandlerRegistration writer(const std::string& consumer = kOrders) const {
    return app_row_writer(consumer, app_table);
  }
  std::string status_of(const std::string& message_id) const {
    return db.query("SELECT status FROM {schema}.inbox_receipts WHERE message_id = '" + message_id + "'")[0][0]
        .as<std::string>();
  }
  std::int64_t app_rows(const std::string& message_id) const {
    return db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = '" + message_id + "'");
  }
};

}  // namespace

TEST_CASE("completion commits the handler's rows together with the COMPLETED receipt") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  Worker worker(s.pool, s.options(), {s.writer()});
  CHECK(worker.drain() == 1);
  CHECK(s.app_rows("m-1") == 1);
  const auto row = s.db.query(
      "SELECT status, attempts, finished_attempts, completed_at IS NOT NULL, "
      "claim_token IS NULL, lease_expires_at IS NULL FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "COMPLETED");
  CHECK(row[1].as<int>() == 1);
  CHECK(row[2].as<int>() == 1);
  CHECK(row[3].as<bool>());
  CHECK(row[4].as<bool>());
  CHECK(row[5].as<bool>());
  CHECK(worker.stats().completed == 1);
}

TEST_CASE("a handler exception rolls back its rows and schedules a retry within the backoff") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.backoff = {.base = 60s, .cap = 600s};
  std::atomic<int> calls{0};
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&, table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    insert_app_row(table, c);
                    throw std::runtime_error("downstream said no");
                  })}});
  worker.drain();
  CHECK(calls == 1);
  CHECK(s.app_rows("m-1") == 0);
  const auto row = s.db.query(
      "SELECT status, attempts, finished_attempts, last_error_type, last_error, "
      "extract(epoch FROM available_at - now()), claim_token IS NULL FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "RETRYABLE");
  CHECK(row[1].as<int>() == 1);
  CHECK(row[2].as<int>() == 1);
  CHECK(row[3].as<std::string>() == "std::runtime_error");
  CHECK(row[4].as<std::string>() == "downstream said no");
  const double delay = row[5].as<double>();
  CHECK(delay >= -1.0);  // full jitter: anywhere from now ...
  CHECK(delay <= 60.0);  // ... to the first ceiling (base)
  CHECK(row[6].as<bool>());
  CHECK(worker.stats().retried == 1);
  // Not due yet (unless jitter picked ~0): a second drain must not call the handler early.
  if (delay > 1.0) {
    worker.drain();
    CHECK(calls == 1);
  }
}

TEST_CASE("a handler that catches an SQL error and returns is retried, and its application row is not written") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  std::atomic<int> calls{0};
  Worker worker(s.pool, s.options(),
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&, table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    insert_app_row(table, c);
                    if (c.attempt > 1) return;
                    try {
                      c.tx.exec("SELECT 1 / 0");
                    } catch (const std::exception&) {
                      // Swallowed, against docs/worker.md's rule: the transaction is aborted
                      // all the same, the row above with it.
                    }
                  })}});
  worker.drain();  // the first attempt fails at its completion; the retry (no backoff) completes
  CHECK(calls == 2);
  const auto row = s.db.query("SELECT status, attempts, finished_attempts, last_error FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "COMPLETED");
  CHECK(row[1].as<int>() == 2);
  CHECK(row[2].as<int>() == 2);
  // What failed the first attempt: the worker's completion in the aborted transaction.
  CHECK_THAT(row[3].as<std::string>(), Catch::Contains("current transaction is aborted"));
  // The first attempt's row never committed; the retry's did, once.
  CHECK(s.app_rows("m-1") == 1);
  CHECK(s.db.scalar("SELECT attempt FROM {schema}.app_rows WHERE message_id = 'm-1'") == 2);
  CHECK(worker.stats().retried == 1);
  CHECK(worker.stats().completed == 1);
}

TEST_CASE("InboxPermanentError makes the receipt DEAD at once") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  Worker worker(s.pool, s.options(),
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    throw InboxPermanentError("order belongs to no tenant");
                  })}});
  worker.drain();
  const auto row = s.db.query("SELECT status, dead_reason, last_error, attempts FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "DEAD");
  CHECK(row[1].as<std::string>() == "HANDLER_PERMANENT");
  CHECK(row[2].as<std::string>() == "order belongs to no tenant");
  CHECK(row[3].as<int>() == 1);
  CHECK(s.app_rows("m-1") == 0);
  CHECK(worker.stats().dead == 1);
}

TEST_CASE("a receipt whose event type or schema version is unsupported becomes DEAD without a handler call") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-type", "thing.vanished", 1));
  s.inbox.accept(message(kOrders, "m-version", "thing.happened", 2));
  std::atomic<int> calls{0};
  Worker worker(s.pool, s.options(),
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext&) { ++calls; })}});
  worker.drain();
  CHECK(calls == 0);
  for (const char* id : {"m-type", "m-version"}) {
    const auto row = s.db.query(std::string("SELECT status, dead_reason, last_error FROM {schema}.inbox_receipts "
                                            "WHERE message_id = '") +
                                id + "'")[0];
    CHECK(row[0].as<std::string>() == "DEAD");
    CHECK(row[1].as<std::string>() == "UNSUPPORTED_EVENT");
    CHECK(row[2].as<std::string>().find("does not support") != std::string::npos);
  }
  CHECK(worker.stats().unsupported == 2);
}

TEST_CASE("a receipt that fails max_attempts times becomes DEAD as exhausted") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.max_attempts = 3;
  std::atomic<int> calls{0};
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    CHECK(c.attempt == calls.load());
                    throw std::runtime_error("attempt " + std::to_string(c.attempt));
                  })}});
  worker.drain();  // backoff is 0 in these tests, so every retry is due at once
  CHECK(calls == 3);
  const auto row = s.db.query(
      "SELECT status, dead_reason, attempts, finished_attempts, last_error "
      "FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "DEAD");
  CHECK(row[1].as<std::string>() == "ATTEMPTS_EXHAUSTED");
  CHECK(row[2].as<int>() == 3);
  CHECK(row[3].as<int>() == 3);
  CHECK(row[4].as<std::string>() == "attempt 3");
}

TEST_CASE("a worker claims only the consumers it owns") {
  Setup s;
  s.inbox.accept(message(kOrders, "o-1"));
  s.inbox.accept(message(kAudit, "a-1"));
  auto options = s.options();
  options.owned_consumers = {kAudit};
  Worker worker(s.pool, options, {s.writer(kOrders), s.writer(kAudit)});
  CHECK(worker.owned_consumers() == std::vector<std::string>{kAudit});
  CHECK(worker.drain() == 1);
  CHECK(s.status_of("a-1") == "COMPLETED");
  CHECK(s.status_of("o-1") == "PENDING");
}

TEST_CASE("the claim observer sees every claim statement with the consumer and the receipts it took") {
  Setup s;
  for (int i = 1; i <= 5; ++i) s.inbox.accept(message(kOrders, "o-" + std::to_string(i)));
  struct Seen {
    std::string consumer;
    std::size_t claimed;
    double seconds;
  };
  std::vector<Seen> seen;
  auto options = s.options();
  options.claim_limit = 2;
  options.on_claim = [&](const std::string& consumer, std::size_t claimed, double seconds) {
    seen.push_back({consumer, claimed, seconds});
  };
  Worker worker(s.pool, options, {s.writer()});
  CHECK(worker.drain() == 5);
  // Claims of 2, 2 and 1, then the empty one that ends the drain.
  REQUIRE(seen.size() == 4);
  CHECK(seen.size() == worker.stats().claim_statements);
  std::size_t claimed = 0;
  for (const auto& claim : seen) {
    CHECK(claim.consumer == kOrders);
    CHECK(claim.claimed <= 2);
    CHECK(claim.seconds > 0);
    CHECK(claim.seconds < 60);
    claimed += claim.claimed;
  }
  CHECK(claimed == 5);
  CHECK(claimed == worker.stats().claimed);
  CHECK(seen.back().claimed == 0);
}

TEST_CASE("by default an enabled worker owns every declared consumer") {
  Setup s;
  s.inbox.accept(message(kOrders, "o-1"));
  s.inbox.accept(message(kAudit, "a-1"));
  auto options = s.options();
  options.owned_consumers = {};
  Worker worker(s.pool, options, {s.writer(kOrders), s.writer(kAudit)});
  CHECK(worker.owned_consumers() == std::vector<std::string>{kOrders, kAudit});
  CHECK(worker.drain() == 2);
  CHECK(s.status_of("o-1") == "COMPLETED");
  CHECK(s.status_of("a-1") == "COMPLETED");
}

TEST_CASE("a declared consumer without a handler fails startup with an error naming it") {
  Setup s;
  auto options = s.options();
  options.owned_consumers = {};  // the default: every declared consumer
  try {
    Worker worker(s.pool, options, {s.writer(kOrders)});
    FAIL("a worker started while declared consumer " << kAudit << " has no handler");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "worker.consumers");
    CHECK(std::string(e.what()).find("'" + kAudit + "'") != std::string::npos);
  }
  // The two ways to run without that handler: list the owned consumers, or disable.
  CHECK(Worker(s.pool, s.options(), {s.writer(kOrders)}).owned_consumers() == std::vector<std::string>{kOrders});
  options.enabled = false;
  CHECK(Worker(s.pool, options, {s.writer(kOrders)}).owned_consumers().empty());
}

TEST_CASE("an enabled worker that would own no consumer fails startup") {
  Setup s;
  auto options = s.options();
  options.consumers = {};
  options.owned_consumers = {};
  try {
    Worker worker(s.pool, options, {});
    FAIL("a worker started owning nothing");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "worker.consumers");
  }
}

TEST_CASE("startup fails with a clear error for inconsistent handler and ownership configuration") {
  Setup s;
  const auto expect_config_error = [&](WorkerOptions options, std::vector<HandlerRegistration> handlers,
                                       const std::string& key) {
    try {
      Worker worker(s.pool, std::move(options), std::move(handlers));
      FAIL("expected ConfigError for " << key);
    } catch (const ConfigError& e) {
      CHECK(e.key() == key);
    }
  };
  auto owned_without_handler = s.options();
  owned_without_handler.owned_consumers = {kAudit};
  expect_config_error(owned_without_handler, {s.writer(kOrders)}, "worker.consumers");

  expect_config_error(s.options(), {s.writer(kOrders), s.writer(kOrders)}, "handlers");

  auto undeclared_owned = s.options();
  undeclared_owned.owned_consumers = {"billing.v1"};
  expect_config_error(undeclared_owned, {s.writer(kOrders)}, "worker.consumers");

  expect_config_error(s.options(), {s.writer("billing.v1")}, "handlers");

  auto short_lease = s.options();
  short_lease.lease = 2s;
  short_lease.handler_timeout = 2s;
  expect_config_error(short_lease, {s.writer()}, "worker.lease_ms");

  auto too_many_threads = s.options();
  too_many_threads.concurrency = 12;  // the pool has 12 connections: one short
  expect_config_error(too_many_threads, {s.writer()}, "pool.size");
}

TEST_CASE("an ingress-only module declares consumers, registers no handlers and never claims") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.enabled = false;
  Worker worker(s.pool, options, {});
  CHECK(worker.owned_consumers().empty());
  worker.start();
  std::this_thread::sleep_for(300ms);
  worker.stop();
  CHECK(worker.drain() == 0);
  CHECK(s.status_of("m-1") == "PENDING");
}

TEST_CASE("two workers never process the same claim concurrently and commit each message once") {
  Setup s;
  constexpr int kMessages = 400;
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < kMessages; ++i) batch.push_back(message(kOrders, "m-" + std::to_string(i)));
  s.inbox.accept_many(batch);

  std::mutex mutex;
  std::set<std::string> running;
  std::atomic<int> overlaps{0};
  auto tracking = [&, table = s.app_table](const nlohmann::json&, HandlerContext& c) {
    {
      std::lock_guard lock(mutex);
      if (!running.insert(c.message_id).second) ++overlaps;
    }
    insert_app_row(table, c);
    std::this_thread::sleep_for(1ms);
    std::lock_guard lock(mutex);
    running.erase(c.message_id);
  };
  auto options = s.options();
  options.concurrency = 3;
  auto pool_a = ConnectionPool::create({.url = s.db.url(), .size = 6});
  auto pool_b = ConnectionPool::create({.url = s.db.url(), .size = 6});
  Worker a(pool_a, options, {{.consumer = kOrders, .supports = {{"thing.happened", 1}}, .handler = handler(tracking)}});
  Worker b(pool_b, options, {{.consumer = kOrders, .supports = {{"thing.happened", 1}}, .handler = handler(tracking)}});
  a.start();
  b.start();
  CHECK(eventually(
      [&] {
        return s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == kMessages;
      },
      60s));
  a.stop();
  b.stop();
  CHECK(overlaps == 0);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == kMessages);
  CHECK(s.db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == kMessages);
  CHECK(a.stats().completed + b.stats().completed == kMessages);
  CHECK(a.stats().completed > 0);
  CHECK(b.stats().completed > 0);
}

TEST_CASE("a handler that outlives its lease while another worker re-claims and completes commits nothing") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto slow_options = s.options();
  slow_options.handler_timeout = 1s;
  slow_options.lease = 2s;
  std::atomic<bool> slow_started{false};
  Worker slow(ConnectionPool::create({.url = s.db.url(), .size = 6}), slow_options,
              {{.consumer = kOrders,
                .supports = {{"thing.happened", 1}},
                .handler = handler([&, table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                  insert_app_row(table, c);
                  slow_started = true;
                  // Ignores its signal and sleeps far past deadline and lease; the server ends
                  // its idle session, the lease runs out, the other worker takes over.
                  std::this_thread::sleep_for(4s);
                  insert_app_row(table, c);
                })}});
  // drain() on its own thread: one claim, no dispatcher that could re-claim for itself.
  std::thread slow_thread([&] { slow.drain(); });
  REQUIRE(eventually([&] { return slow_started.load(); }, 10s));

  Worker fast(ConnectionPool::create({.url = s.db.url(), .size = 6}), s.options(), {s.writer()});
  fast.start();
  CHECK(eventually([&] { return s.status_of("m-1") == "COMPLETED"; }, 15s));
  slow_thread.join();
  fast.stop();
  const auto rows = s.db.query("SELECT attempt FROM {schema}.app_rows");
  REQUIRE(rows.size() == 1);
  // The slow claim expired outside a solo run: lease recovery gave its attempt back, and
  // the suspect lane's re-run is attempt 1 again.
  CHECK(rows[0][0].as<int>() == 1);
  CHECK(s.db.scalar("SELECT attempts FROM {schema}.inbox_receipts") == 1);
  CHECK(slow.stats().completed == 0);
  CHECK(slow.stats().stale == 1);
  CHECK(fast.stats().completed == 1);
}

TEST_CASE("a handler that sleeps past its deadline ignoring the signal is cut off, rolled back and retried") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.handler_timeout = 300ms;
  options.lease = 3s;
  std::atomic<int> calls{0};
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&, table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                    ++calls;
                    insert_app_row(table, c);
                    if (c.attempt == 1) std::this_thread::sleep_for(600ms);
                  })}});
  worker.drain();
  CHECK(calls == 2);
  CHECK(s.status_of("m-1") == "COMPLETED");
  const auto rows = s.db.query("SELECT attempt FROM {schema}.app_rows");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0][0].as<int>() == 2);
  CHECK(s.db.query("SELECT last_error_type FROM {schema}.inbox_receipts")[0][0].as<std::string>() == "HandlerTimeout");
}

TEST_CASE("a handler's transaction carries its deadline server-side, set by the statement that locks the receipt") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.handler_timeout = 20s;
  options.lease = 30s;
  long long statement_ms = 0, idle_ms = 0;
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    std::tie(statement_ms, idle_ms) = transaction_deadline_ms(c.tx);
                  })}});
  worker.drain();
  CHECK(s.status_of("m-1") == "COMPLETED");
  // What was left of the 20 s when the lock ran, and 500 ms more for the idle gaps.
  CHECK(statement_ms > 15000);
  CHECK(statement_ms <= 20000);
  CHECK(idle_ms == statement_ms + 500);
  // Transaction-local: gone once the handler's transaction ended.
  auto tx = s.pool->begin();
  CHECK(tx.exec("SELECT current_setting('statement_timeout')")[0][0].as<std::string>() == "0");
  tx.commit();
}

TEST_CASE("a handler stuck in a long query is cancelled at its deadline") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.handler_timeout = 300ms;
  options.lease = 3s;
  options.max_attempts = 1;
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    c.tx.exec("SELECT pg_sleep(30)");
                  })}});
  const auto started = std::chrono::steady_clock::now();
  worker.drain();
  CHECK(std::chrono::steady_clock::now() - started < 10s);
  CHECK(s.status_of("m-1") == "DEAD");
  CHECK(s.app_rows("m-1") == 0);
}

TEST_CASE("a cooperative handler sees its signal fire at the deadline") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.handler_timeout = 200ms;
  options.lease = 2s;
  options.max_attempts = 1;
  std::atomic<bool> saw_cancel{false};
  std::atomic<bool> callback_ran{false};
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    CHECK(c.deadline > std::chrono::steady_clock::now());
                    c.signal.on_cancel([&] { callback_ran = true; });
                    while (!c.signal.cancelled()) std::this_thread::sleep_for(5ms);
                    saw_cancel = true;
                    throw std::runtime_error("stopped cooperatively");
                  })}});
  worker.drain();
  CHECK(saw_cancel);
  CHECK(callback_ran);
  CHECK(s.status_of("m-1") == "DEAD");
}

TEST_CASE("an expired lease outside a solo run is given back without spending the attempt and re-run as a suspect") {
  Setup s;
  const auto id = s.inbox.accept(message(kOrders, "m-1")).id;
  // A worker claimed it and died: PROCESSING with a lease in the past. Out of attempts,
  // too: the claim is not charged, so it still runs.
  s.db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', attempts = 5, "
      "claim_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second' WHERE id = " +
      std::to_string(id));
  Worker worker(s.pool, s.options(), {s.writer()});  // max_attempts = 5
  worker.drain();
  CHECK(s.status_of("m-1") == "COMPLETED");
  const auto row = s.db.query("SELECT attempts, suspect, crash_strikes FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<int>() == 5);  // 5 - 1 given back, + 1 for the suspect lane's claim
  CHECK(row[1].as<bool>());
  CHECK(row[2].as<int>() == 0);
  CHECK(s.app_rows("m-1") == 1);
  CHECK(worker.stats().crash_strikes == 0);
}

TEST_CASE("a suspect claimed alone but never started is given back without a crash strike") {
  Setup s;
  const auto id = s.inbox.accept(message(kOrders, "m-1")).id;
  s.db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', attempts = 5, suspect = true, "
      "claim_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second' WHERE id = " +
      std::to_string(id));
  Worker worker(s.pool, s.options(), {s.writer()});
  worker.drain();
  CHECK(s.status_of("m-1") == "COMPLETED");
  CHECK(s.db.scalar("SELECT crash_strikes FROM {schema}.inbox_receipts") == 0);
}

TEST_CASE("an expired lease on a solo run out of attempts is a crash strike that makes it DEAD without a call") {
  Setup s;
  const auto id = s.inbox.accept(message(kOrders, "m-1")).id;
  // The suspect lane had started it alone (solo_started_at) when its process died.
  s.db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', attempts = 5, finished_attempts = 2, "
      "suspect = true, solo_started_at = now() - interval '3 seconds', crash_strikes = 2, "
      "claim_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second' WHERE id = " +
      std::to_string(id));
  std::atomic<int> calls{0};
  Worker worker(s.pool, s.options(),  // max_attempts = 5
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext&) { ++calls; })}});
  worker.drain();
  CHECK(calls == 0);
  const auto row = s.db.query(
      "SELECT status, dead_reason, last_error_type, last_error, attempts, finished_attempts "
      "FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "DEAD");
  CHECK(row[1].as<std::string>() == "LEASE_EXPIRED_EXHAUSTED");
  CHECK(row[2].as<std::string>() == "LeaseExpired");
  CHECK(row[3].as<std::string>().find("crash strike 3:") == 0);
  CHECK(row[3].as<std::string>().find("5 of 5 attempts used, 3 ended in lease expiry") != std::string::npos);
  CHECK(row[4].as<int>() == 5);
  CHECK(row[5].as<int>() == 2);
  CHECK(s.db.scalar("SELECT crash_strikes FROM {schema}.inbox_receipts") == 3);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE solo_started_at IS NULL") == 1);
  CHECK(worker.stats().lease_expired == 1);
  CHECK(worker.stats().crash_strikes == 1);
}

TEST_CASE("a suspect runs alone: no other message is in flight in its worker while its handler runs") {
  Setup s;
  // A claim of a worker that died, expiring while this worker is busy with other messages.
  const auto id = s.inbox.accept(message(kOrders, "suspect")).id;
  s.db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', attempts = 1, "
      "claim_token = gen_random_uuid(), lease_expires_at = now() + interval '400 milliseconds' WHERE id = " +
      std::to_string(id));
  // Enough that some are still due once the suspect ran: the lane waits for the local
  // queue (up to 2 x claim_limit claimed ahead) to empty first.
  std::vector<AcceptRequest> normal;
  for (int i = 0; i < 300; ++i) normal.push_back(message(kOrders, "m-" + std::to_string(i)));
  s.inbox.accept_many(normal);

  std::atomic<int> in_flight{0}, most_beside_suspect{0}, completed_after_suspect{0};
  std::atomic<bool> suspect_done{false};
  auto options = s.options();
  options.concurrency = 4;
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&, table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                    ++in_flight;
                    insert_app_row(table, c);
                    if (c.message_id == "suspect") {
                      for (int i = 0; i < 40; ++i) {
                        most_beside_suspect = std::max(most_beside_suspect.load(), in_flight.load() - 1);
                        std::this_thread::sleep_for(5ms);
                      }
                      suspect_done = true;
                    } else {
                      std::this_thread::sleep_for(20ms);
                      if (suspect_done) ++completed_after_suspect;
                    }
                    --in_flight;
                  })}});
  worker.start();
  CHECK(eventually(
      [&] {
        return s.db.scalar(
                   "SELECT count(*) FROM {schema}.inbox_receipts WHERE status = "
                   "'COMPLETED'") == 301;
      },
      30s));
  worker.stop();
  CHECK(most_beside_suspect == 0);
  // It was released while normal messages were in flight, and they resumed after it.
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE suspect") == 1);
  CHECK(completed_after_suspect > 0);
  CHECK(s.db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'suspect'") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 301);
}

TEST_CASE("lease recovery stays inside worker.consumers: expired claims of other consumers are left to their owner") {
  Setup s;
  const auto orders = s.inbox.accept(message(kOrders, "o-1")).id;
  const auto audit_retry = s.inbox.accept(message(kAudit, "a-1")).id;
  const auto audit_exhausted = s.inbox.accept(message(kAudit, "a-2")).id;
  // Workers that died holding claims: PROCESSING with leases in the past.
  // `solo`: its solo run had started, so recovering the claim is a crash strike.
  const auto expire = [&](std::int64_t id, int attempts, bool solo) {
    s.db.query("UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', attempts = " + std::to_string(attempts) +
               (solo ? ", suspect = true, solo_started_at = now()" : "") +
               ", claim_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second' WHERE id = " +
               std::to_string(id));
  };
  expire(orders, 1, false);
  expire(audit_retry, 1, false);
  expire(audit_exhausted, 5, true);  // max_attempts = 5: recovering it would make it DEAD
  const auto audit_claims = [&] {
    return s.db.query(
        "SELECT message_id, status, attempts, claim_token::text, lease_expires_at::text "
        "FROM {schema}.inbox_receipts WHERE consumer = '" +
        kAudit + "' ORDER BY id");
  };
  const auto before = audit_claims();

  auto options = s.options();
  options.owned_consumers = {kOrders};
  // It has a handler for audit.v1 too: ownership, not a missing handler, keeps it away.
  Worker orders_worker(s.pool, options, {s.writer(kOrders), s.writer(kAudit)});
  orders_worker.drain();
  CHECK(s.status_of("o-1") == "COMPLETED");  // its own expired claim was recovered
  const auto after = audit_claims();
  REQUIRE(after.size() == 2);
  for (int row = 0; row < 2; ++row)
    for (int column = 0; column < 5; ++column)
      CHECK(std::string(after[row][column].c_str()) == std::string(before[row][column].c_str()));
  CHECK(s.app_rows("a-1") == 0);
  CHECK(orders_worker.stats().dead == 0);
  CHECK(orders_worker.stats().lease_expired == 0);

  // Their owner recovers them.
  options.owned_consumers = {kAudit};
  Worker audit_worker(s.pool, options, {s.writer(kOrders), s.writer(kAudit)});
  audit_worker.drain();
  CHECK(s.status_of("a-1") == "COMPLETED");
  CHECK(s.status_of("a-2") == "DEAD");
  CHECK(audit_worker.stats().lease_expired == 1);
}

TEST_CASE("accept wakes an idle worker through NOTIFY well before its poll interval") {
  Setup s;
  auto options = s.options();
  options.poll_interval = 20s;
  Worker worker(s.pool, options, {s.writer()});
  worker.start();
  std::this_thread::sleep_for(300ms);  // the first claim round found nothing; now idle
  s.inbox.accept(message(kOrders, "m-1"));
  CHECK(eventually([&] { return s.status_of("m-1") == "COMPLETED"; }, 5s));
  worker.stop();
}

TEST_CASE("graceful stop hands back claimed but unstarted receipts without spending an attempt") {
  Setup s;
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < 6; ++i) batch.push_back(message(kOrders, "m-" + std::to_string(i)));
  s.inbox.accept_many(batch);
  auto options = s.options();
  options.concurrency = 1;
  options.shutdown_grace = 5s;
  std::atomic<bool> in_handler{false};
  std::atomic<bool> signalled{false};
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&, table = s.app_table](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    in_handler = true;
                    while (!c.signal.cancelled()) std::this_thread::sleep_for(5ms);
                    signalled = true;  // finishes its work after the stop signal
                  })}});
  worker.start();
  REQUIRE(eventually([&] { return in_handler.load(); }));
  std::this_thread::sleep_for(200ms);  // the local queue holds the next claims
  worker.stop();
  CHECK(signalled);
  CHECK(worker.stats().handed_back >= 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PROCESSING'") == 0);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING' AND attempts = 0") == 5);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
}

TEST_CASE("the handler context carries identity, attempt and metadata") {
  Setup s;
  auto request = message(kOrders, "m-1");
  request.metadata = {
      .traceparent = "00-abc-def-01", .correlation_id = "corr", .causation_id = "cause", .headers = {{"h", "v"}}};
  s.inbox.accept(request);
  std::optional<nlohmann::json> seen;
  Worker worker(s.pool, s.options(),
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json& payload, HandlerContext& c) {
                    seen = nlohmann::json{{"payload", payload},
                                          {"scope", c.scope.id},
                                          {"global", c.scope.kind == Scope::Kind::Global},
                                          {"source", c.source},
                                          {"consumer", c.consumer},
                                          {"message", c.message_id},
                                          {"type", c.event_type},
                                          {"version", c.schema_version},
                                          {"attempt", c.attempt},
                                          {"trace", c.metadata.traceparent},
                                          {"corr", c.metadata.correlation_id},
                                          {"cause", c.metadata.causation_id},
                                          {"h", c.metadata.headers.at("h")}};
                  })}});
  worker.drain();
  REQUIRE(seen);
  CHECK(*seen == nlohmann::json{{"payload", {{"id", "m-1"}}},
                                {"scope", "t1"},
                                {"global", false},
                                {"source", "test"},
                                {"consumer", kOrders},
                                {"message", "m-1"},
                                {"type", "thing.happened"},
                                {"version", 1},
                                {"attempt", 1},
                                {"trace", "00-abc-def-01"},
                                {"corr", "corr"},
                                {"cause", "cause"},
                                {"h", "v"}});
}

TEST_CASE("a long error message is stored bounded with a visible truncation marker") {
  Setup s;
  s.inbox.accept(message(kOrders, "m-1"));
  auto options = s.options();
  options.max_error_bytes = 100;
  options.max_attempts = 1;
  Worker worker(s.pool, options,
                {{.consumer = kOrders,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([](const nlohmann::json&, HandlerContext&) {
                    throw std::runtime_error(std::string(5000, 'e'));
                  })}});
  worker.drain();
  CHECK(s.db.query("SELECT last_error FROM {schema}.inbox_receipts")[0][0].as<std::string>() ==
        std::string(100, 'e') + "…[truncated 4900 bytes]");
}
