// With batch_size 1, a handler thread takes a short run of consecutive claims from a deep
// queue (inbox/src/handler_pool.cpp, take_locked). What the runs must keep: claims that wait,
// in the queue or in a run, keep their leases; a slow handler does not hold the messages
// of its run back; stop() hands back what a run never started; and the lease renewal
// never waits for a receipt a handler has locked.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <pqxx/pqxx>

#include "boxcar/inbox/detail/named_statements.hpp"
#include "boxcar/inbox/worker.hpp"
#include "named_statement.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "c.v1";
using Clock = std::chrono::steady_clock;

// Accepts `count` messages m-00, m-01, ... before any worker runs, so the first claim
// fills the queue and the handler threads take runs from it.
void accept_backlog(Inbox& inbox, int count) {
  for (int i = 0; i < count; ++i) inbox.accept(message(kConsumer, (i < 10 ? "m-0" : "m-") + std::to_string(i)));
}

// A one-message-per-transaction worker (batch_size 1, the default) of kConsumer.
WorkerOptions one_message_options(const TestDatabase& db, std::size_t concurrency, std::chrono::milliseconds lease,
                                  std::chrono::milliseconds handler_timeout) {
  return {.schema = db.schema(),
          .consumers = {kConsumer},
          .concurrency = concurrency,
          .lease = lease,
          .handler_timeout = handler_timeout,
          .max_attempts = 5,
          .backoff = {.base = 0ms, .cap = 0ms},
          .poll_interval = 100ms,
          .shutdown_grace = 5s};
}

HandlerRegistration registration(std::function<void(HandlerContext&)> handle) {
  return {.consumer = kConsumer,
          .supports = {{"thing.happened", 1}},
          .handler = handler([handle = std::move(handle)](const nlohmann::json&, HandlerContext& c) { handle(c); })};
}

std::int64_t completed(const TestDatabase& db) {
  return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'");
}

}  // namespace

TEST_CASE("with batch_size 1, claims waiting in the queue and in a run outlive their first lease without expiring") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(4);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  accept_backlog(inbox, 10);
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};
  // One thread, 400 ms a message: the tenth waits about 3.6 s, in the queue (room for 8)
  // and then in the thread's run, against a lease of 2.5 s. Without renewals its lease,
  // and others', would expire: lease recovery would release them as suspects and their
  // queued claims would go stale.
  Worker worker(pool, one_message_options(db, 1, 2500ms, 1s), {registration([&](HandlerContext& c) {
                  std::this_thread::sleep_for(400ms);
                  insert_app_row(table, c);
                  ++calls;
                })});
  worker.start();
  REQUIRE(eventually([&] { return completed(db) == 10; }, 20s));
  worker.stop();

  CHECK(calls == 10);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE attempts = 1 AND NOT suspect") == 10);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 10);
  const auto stats = worker.stats();
  CHECK(stats.stale == 0);
  CHECK(stats.lease_expired == 0);
  CHECK(stats.completed == 10);
}

TEST_CASE("with batch_size 1, a slow handler's run goes back to the queue and runs on another thread meanwhile") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(4);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  // 16 fill the queue of two threads (2 x 4 x 2): the first thread takes m-00 and a run of
  // m-01..m-03 behind it, the second the next four.
  accept_backlog(inbox, 16);
  const std::string table = db.qualified("{schema}.app_rows");
  std::mutex mutex;
  std::map<std::string, Clock::time_point> started;
  Clock::time_point slow_returned{};
  Worker worker(pool, one_message_options(db, 2, 10s, 5s), {registration([&](HandlerContext& c) {
                  {
                    std::lock_guard lock(mutex);
                    started.emplace(c.message_id, Clock::now());
                  }
                  if (c.message_id == "m-00") std::this_thread::sleep_for(2s);
                  insert_app_row(table, c);
                  if (c.message_id == "m-00") {
                    std::lock_guard lock(mutex);
                    slow_returned = Clock::now();
                  }
                })});
  worker.start();
  REQUIRE(eventually([&] { return completed(db) == 16; }, 20s));
  worker.stop();

  std::lock_guard lock(mutex);
  REQUIRE(started.size() == 16);
  // Every other message ran while m-00's handler slept, its own run's included.
  for (const auto& [message_id, at] : started) {
    if (message_id == "m-00") continue;
    INFO(message_id);
    CHECK(at < slow_returned);
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE attempts = 1") == 16);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 16);
}

namespace {

// One handler thread takes m-00 and a run of three more; four stay queued. stop() comes
// as m-00's handler starts, which then takes `handler_time`; every other message must be
// handed back once, due again, its attempt not spent.
void stop_during_a_run(std::chrono::milliseconds handler_time) {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(4);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  accept_backlog(inbox, 8);
  const std::string table = db.qualified("{schema}.app_rows");
  std::promise<void> first_started;
  std::atomic<int> calls{0};
  Worker worker(pool, one_message_options(db, 1, 10s, 5s), {registration([&](HandlerContext& c) {
                  if (++calls == 1) first_started.set_value();
                  std::this_thread::sleep_for(handler_time);
                  insert_app_row(table, c);
                })});
  worker.start();
  first_started.get_future().wait();
  worker.stop();

  CHECK(calls == 1);
  CHECK(completed(db) == 1);
  // The run's three and the queue's four: due again, their attempt not spent, no claim.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING' AND attempts = 0 AND "
                  "claim_token IS NULL AND lease_expires_at IS NULL") == 7);
  CHECK(worker.stats().handed_back == 7);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
}

}  // namespace

TEST_CASE("stop() during a run hands back the claims the run never started, unspent") {
  // Shorter than the stall that would put the run back on the queue.
  stop_during_a_run(50ms);
}

TEST_CASE("stop() during a run that stalls hands back the run's unstarted claims instead of queueing them") {
  // Past the stall after which a running worker puts the run back on the queue: once
  // stop() has begun, nothing would take it from there.
  stop_during_a_run(400ms);
}

TEST_CASE("the lease renewal passes over a receipt another transaction has locked instead of waiting for it") {
  TestDatabase db;
  auto pool = db.pool(2);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  accept_backlog(inbox, 2);
  db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', attempts = 1, claim_token = gen_random_uuid(), "
      "lease_expires_at = now() + interval '1 second'");
  const auto rows = db.query("SELECT id, claim_token::text FROM {schema}.inbox_receipts ORDER BY id");
  const std::string ids = "{" + rows[0][0].as<std::string>() + "," + rows[1][0].as<std::string>() + "}";
  const std::string tokens = "{" + rows[0][1].as<std::string>() + "," + rows[1][1].as<std::string>() + "}";

  // A handler's transaction holds the first receipt, as the lock statement takes it.
  auto handler_connection = db.connect();
  pqxx::work handler_tx(handler_connection);
  handler_tx.exec("SELECT id FROM " + db.qualified("{schema}.inbox_receipts") +
                  " WHERE id = " + rows[0][0].as<std::string>() + " FOR NO KEY UPDATE");

  auto connection = db.connect();
  connection.prepare("renew", db.qualified(statement_sql(detail::inbox_statements(), "worker.renew_leases")));
  pqxx::nontransaction n(connection);
  n.exec("SET statement_timeout = '5s'");
  const auto started = Clock::now();
  const auto renewed = n.exec_prepared("renew", ids, tokens, 60000);
  CHECK(Clock::now() - started < 4s);
  CHECK(renewed.affected_rows() == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE lease_expires_at > now() + interval '30 "
                  "seconds'") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE id = " + rows[1][0].as<std::string>() +
                  " AND lease_expires_at > now() + interval '30 seconds'") == 1);
  handler_tx.abort();
}
