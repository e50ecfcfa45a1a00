// Real faults on the handler transaction: the worker's connection lost around the COMMIT
// that carries the handler's writes and the guarded completion, or the database gone
// under a running handler. Whatever the worker could not learn, the receipt must end in
// one committed outcome: the handler's write present exactly once. And the other side of
// the outage rule: an error that only looks like an outage, raised by a handler's own
// statement while the database is up, is charged like any failure (docs/worker.md,
// "Infrastructure failures are not attempts"). A real full disk: full_disk_test.cpp.
#include <catch2/catch.hpp>

#include <atomic>
#include <regex>
#include <thread>

#include "boxcar/inbox/batch_handler.hpp"
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

// A handler that writes its row and then runs `failing_sql` whenever `fails` says so, on
// a healthy database: whatever SQLSTATE it raises, the probe finds the database up.
HandlerRegistration failing_writer(const std::string& table, std::string failing_sql,
                                   std::function<bool(const HandlerContext&)> fails, std::atomic<int>& calls) {
  return {.consumer = kConsumer,
          .supports = {{"thing.happened", 1}},
          .handler = handler([&calls, table, failing_sql = std::move(failing_sql), fails = std::move(fails)](
                                 const nlohmann::json&, HandlerContext& c) {
            ++calls;
            insert_app_row(table, c);
            if (fails(c)) c.tx.exec(failing_sql);
          })};
}

const std::string kRaise53400 =
    "DO $$ BEGIN RAISE EXCEPTION 'temporary file size exceeds temp_file_limit' USING ERRCODE = '53400'; END $$";
const std::string kRaiseDiskFull =
    "DO $$ BEGIN RAISE EXCEPTION 'could not extend file' USING ERRCODE = 'disk_full'; END $$";
const std::string kRaiseIoError = "DO $$ BEGIN RAISE EXCEPTION 'could not read block' USING ERRCODE = '58030'; END $$";
const std::string kRaiseCannotConnect =
    "DO $$ BEGIN RAISE EXCEPTION 'the peer is starting up' USING ERRCODE = 'cannot_connect_now'; END $$";
// A real 57P01 and a lost connection: the handler's own session terminated.
const std::string kTerminateOwnSession = "SELECT pg_catalog.pg_terminate_backend(pg_catalog.pg_backend_pid())";

// Runs `failing_sql` on every attempt of one message with max_attempts 3: it must end
// DEAD (ATTEMPTS_EXHAUSTED) after exactly 3 handler calls, none of its writes committed.
void charged_on_a_healthy_database(const std::string& failing_sql) {
  Setup s;
  s.inbox.accept(message(kConsumer, "m-1"));
  std::atomic<int> calls{0};
  Worker worker(s.worker_pool,
                {.schema = s.db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 1,
                 .lease = 5s,
                 .handler_timeout = 3s,
                 .max_attempts = 3,
                 .backoff = {.base = 0ms, .cap = 0ms},
                 .poll_interval = 50ms},
                {failing_writer(
                    s.app_table, failing_sql, [](const HandlerContext&) { return true; }, calls)});
  worker.start();
  const bool dead = eventually([&] { return s.receipt()[0].as<std::string>() == "DEAD"; }, 30s);
  worker.stop();
  INFO(failing_sql);
  REQUIRE(dead);
  const auto row = s.db.query("SELECT attempts, dead_reason, outage_hand_backs FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<int>() == 3);
  CHECK(row[1].as<std::string>() == "ATTEMPTS_EXHAUSTED");
  CHECK(row[2].as<int>() == 0);
  CHECK(calls == 3);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 0);
  CHECK(worker.stats().infrastructure_retries == 0);
  CHECK(worker.stats().retried == 2);
  CHECK(worker.stats().dead == 1);
}

}  // namespace

TEST_CASE("a handler that raises 53400 on every run with the database healthy goes DEAD after max_attempts") {
  charged_on_a_healthy_database(kRaise53400);
}

TEST_CASE(
    "a handler whose own statements fail with outage SQLSTATEs while the database is healthy is charged: the probe "
    "finds the database up") {
  SECTION("disk full (53100): the write probe writes") { charged_on_a_healthy_database(kRaiseDiskFull); }
  SECTION("an I/O error (58030): the write probe writes") { charged_on_a_healthy_database(kRaiseIoError); }
  SECTION("cannot connect now (57P03): a fresh connection answers") {
    charged_on_a_healthy_database(kRaiseCannotConnect);
  }
  SECTION("its own session terminated (57P01, the connection lost): a fresh connection answers") {
    charged_on_a_healthy_database(kTerminateOwnSession);
  }
}

namespace {

enum class BatchKind { Rerun, Savepoint, BatchHandler };

// A batch of 5 in which m-2's handler raises `failing_sql` on every run, on a healthy
// database: the other four complete on their first attempt, and m-2 alone is charged
// until it is DEAD.
void one_bad_member_in_a_batch_of_five(BatchKind kind, const std::string& failing_sql) {
  Setup s;
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(message(kConsumer, "m-" + std::to_string(i)));
  s.inbox.accept_many(batch);
  std::atomic<int> calls{0};
  HandlerRegistration registration = failing_writer(
      s.app_table, failing_sql, [](const HandlerContext& c) { return c.message_id == "m-2"; }, calls);
  if (kind == BatchKind::BatchHandler) {
    // Writes every message's row in the batch's transaction, then fails the call when m-2
    // is in it: the messages then run again one by one as one-message batches.
    registration.handler = nullptr;
    registration.batch_handler =
        batch_handler([&, table = s.app_table](std::span<const InboxMessage> messages, BatchContext& context) {
          ++calls;
          bool bad = false;
          for (const auto& m : messages) {
            context.tx.exec("INSERT INTO " + table + " (message_id, attempt) VALUES ($1, $2)", m.message_id, m.attempt);
            bad = bad || m.message_id == "m-2";
          }
          if (bad) context.tx.exec(failing_sql);
          return BatchOutcomes(messages.size(), MessageOutcome::completed());
        });
  }
  Worker worker(
      s.worker_pool,
      {.schema = s.db.schema(),
       .consumers = {kConsumer},
       .concurrency = 1,
       .batch_size = 5,
       .batch_failure_mode = kind == BatchKind::Savepoint ? BatchFailureMode::Savepoint : BatchFailureMode::Rerun,
       .claim_limit = 5,
       .lease = 10s,
       .handler_timeout = 3s,
       .max_attempts = 3,
       .backoff = {.base = 0ms, .cap = 0ms},
       .poll_interval = 50ms},
      {registration});
  worker.start();
  const bool settled = eventually(
      [&] {
        return s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status IN ('COMPLETED', 'DEAD')") == 5;
      },
      30s);
  worker.stop();
  INFO(failing_sql);
  REQUIRE(settled);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED' AND attempts = 1 "
                    "AND message_id <> 'm-2'") == 4);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-2' AND status = 'DEAD' "
                    "AND attempts = 3 AND dead_reason = 'ATTEMPTS_EXHAUSTED'") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 4);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'm-2'") == 0);
  CHECK(worker.stats().infrastructure_retries == 0);
}

}  // namespace

TEST_CASE("the 53400 handler inside a batch of 5 leaves the other 4 COMPLETED, in each batch mode") {
  SECTION("re-run mode") { one_bad_member_in_a_batch_of_five(BatchKind::Rerun, kRaise53400); }
  SECTION("savepoint mode") { one_bad_member_in_a_batch_of_five(BatchKind::Savepoint, kRaise53400); }
  SECTION("a batch handler") { one_bad_member_in_a_batch_of_five(BatchKind::BatchHandler, kRaise53400); }
}

TEST_CASE("a handler's own disk_full inside a batch of 5 is judged alone: the other 4 complete, it is charged") {
  SECTION("re-run mode") { one_bad_member_in_a_batch_of_five(BatchKind::Rerun, kRaiseDiskFull); }
  SECTION("savepoint mode") { one_bad_member_in_a_batch_of_five(BatchKind::Savepoint, kRaiseDiskFull); }
  SECTION("a batch handler") { one_bad_member_in_a_batch_of_five(BatchKind::BatchHandler, kRaiseDiskFull); }
}

namespace {

// The database becomes unreachable (the proxy cut) while the handler runs, and comes back
// a little later; max_attempts 1, so a charged attempt would make the receipt DEAD.
void outage_under_the_handler(std::size_t batch_size) {
  Setup s;
  for (int i = 1; i <= static_cast<int>(batch_size); ++i) s.inbox.accept(message(kConsumer, "m-" + std::to_string(i)));
  std::atomic<bool> cut{false};
  Worker worker(s.worker_pool,
                {.schema = s.db.schema(),
                 .consumers = {kConsumer},
                 .concurrency = 1,
                 .batch_size = batch_size,
                 .lease = 2s,
                 .handler_timeout = 1s,
                 .max_attempts = 1,
                 .backoff = {.base = 20ms, .cap = 100ms},
                 .poll_interval = 100ms},
                {{.consumer = kConsumer,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    ++s.calls;
                    insert_app_row(s.app_table, c);
                    if (!cut.exchange(true)) {
                      s.proxy.set_down(true);
                      c.tx.exec("SELECT 1");  // the connection is gone
                    }
                  })}});
  worker.start();
  // The probe's fresh connection goes through the proxy too, and is refused: an outage.
  CHECK(eventually([&] { return worker.stats().infrastructure_retries >= 1; }, 10s));
  s.proxy.set_down(false);
  const bool completed = eventually(
      [&] {
        return s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") ==
               static_cast<std::int64_t>(batch_size);
      },
      20s);
  worker.stop();
  REQUIRE(completed);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 0);
  CHECK(s.db.scalar("SELECT max(attempts) FROM {schema}.inbox_receipts") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == static_cast<std::int64_t>(batch_size));
  CHECK(worker.stats().retried == 0);
  CHECK(worker.stats().dead == 0);
}

}  // namespace

TEST_CASE("a real outage under a running handler (the proxy cut) charges nothing") { outage_under_the_handler(1); }

TEST_CASE("a real outage under a running batch (the proxy cut) charges none of its messages") {
  outage_under_the_handler(3);
}
