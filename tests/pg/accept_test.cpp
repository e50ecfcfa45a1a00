#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <thread>

#include <pqxx/pqxx>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "test_database.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using boxcar::testing::TestDatabase;

namespace {

const std::string kConsumer = "orders.projection.v1";

InboxOptions options_for(const TestDatabase& db, bool notify = false) {
  return {.schema = db.schema(), .consumers = {kConsumer, "audit.v1"}, .notify = notify};
}

AcceptRequest order(const std::string& id, nlohmann::json payload = {{"orderId", "o-1"}, {"total", 12.5}}) {
  return {.scope = Scope::tenant("tenant-1"),
          .source = "orders-service",
          .consumer = kConsumer,
          .message_id = id,
          .event_type = "order.created",
          .schema_version = 1,
          .payload = std::move(payload),
          .metadata = {.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                       .correlation_id = "corr-1",
                       .causation_id = "cause-1",
                       .headers = {{"x-origin", "test"}}}};
}

}  // namespace

TEST_CASE("accept records a new identity as a PENDING receipt with its content and metadata") {
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db));
  const Receipt receipt = inbox.accept(order("m-1"));
  CHECK(receipt.kind == Receipt::Kind::Accepted);
  CHECK(receipt.status == ReceiptStatus::Pending);
  CHECK(receipt.id > 0);

  const auto row = db.query(
      "SELECT scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, "
      "payload::text, metadata->>'traceparent', metadata->>'correlationId', metadata->>'causationId', "
      "metadata->'headers'->>'x-origin', fingerprint, status, attempts, claim_token IS NULL "
      "FROM {schema}.inbox_receipts WHERE id = " +
      std::to_string(receipt.id))[0];
  CHECK(row[0].as<std::string>() == "tenant");
  CHECK(row[1].as<std::string>() == "tenant-1");
  CHECK(row[2].as<std::string>() == "orders-service");
  CHECK(row[3].as<std::string>() == kConsumer);
  CHECK(row[4].as<std::string>() == "m-1");
  CHECK(row[5].as<std::string>() == "order.created");
  CHECK(row[6].as<int>() == 1);
  CHECK(nlohmann::json::parse(row[7].as<std::string>()) == nlohmann::json({{"orderId", "o-1"}, {"total", 12.5}}));
  CHECK(row[8].as<std::string>() == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  CHECK(row[9].as<std::string>() == "corr-1");
  CHECK(row[10].as<std::string>() == "cause-1");
  CHECK(row[11].as<std::string>() == "test");
  CHECK(row[12].as<std::string>() == content_fingerprint("order.created", 1, canonicalize(order("m-1").payload)));
  CHECK(row[13].as<std::string>() == "PENDING");
  CHECK(row[14].as<int>() == 0);
  CHECK(row[15].as<bool>());
}

TEST_CASE("a redelivered identity returns duplicate with the same receipt id") {
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db));
  const Receipt first = inbox.accept(order("m-1"));
  const Receipt again = inbox.accept(order("m-1"));
  CHECK(again.kind == Receipt::Kind::Duplicate);
  CHECK(again.id == first.id);
  CHECK(again.status == ReceiptStatus::Pending);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);
}

TEST_CASE("a duplicate reports the stored status without resetting attempts or the retry schedule") {
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db));
  const Receipt first = inbox.accept(order("m-1"));
  db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'RETRYABLE', attempts = 3, finished_attempts = 3, "
      "available_at = '2030-01-01', last_error = 'boom', updated_at = '2020-01-01' WHERE id = " +
      std::to_string(first.id));
  const Receipt again = inbox.accept(order("m-1"));
  CHECK(again.kind == Receipt::Kind::Duplicate);
  CHECK(again.status == ReceiptStatus::Retryable);
  const auto row = db.query(
      "SELECT status, attempts, available_at = '2030-01-01', last_error, "
      "updated_at = '2020-01-01' FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "RETRYABLE");
  CHECK(row[1].as<int>() == 3);
  CHECK(row[2].as<bool>());
  CHECK(row[3].as<std::string>() == "boom");
  CHECK(row[4].as<bool>());

  for (const char* status : {"COMPLETED", "DEAD"}) {
    db.query(std::string("UPDATE {schema}.inbox_receipts SET status = '") + status + "', completed_at = CASE WHEN '" +
             status +
             "' = 'COMPLETED' THEN now() END, "
             "dead_reason = CASE WHEN '" +
             status + "' = 'DEAD' THEN 'test' END");
    CHECK(inbox.accept(order("m-1")).status == parse_receipt_status(status));
  }
}

TEST_CASE("a duplicate of a receipt a worker is processing reports PROCESSING and leaves its claim alone") {
  using namespace std::chrono_literals;
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db));
  const Receipt first = inbox.accept(order("m-1"));

  // A real claim: the handler holds it until the test lets go.
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> calls{0};
  Worker worker(db.pool(),
                {.schema = db.schema(),
                 .consumers = {kConsumer, "audit.v1"},
                 .owned_consumers = {kConsumer},
                 .concurrency = 1,
                 .lease = 30s,
                 .handler_timeout = 20s,
                 .poll_interval = 100ms},
                {{.consumer = kConsumer,
                  .supports = {{"order.created", 1}},
                  .handler = boxcar::testing::handler([&](const nlohmann::json&, HandlerContext&) {
                    if (++calls == 1) started.set_value();
                    released.wait_for(15s);  // bounded: a failed check must not hang stop()
                  })}});
  worker.start();
  REQUIRE(started.get_future().wait_for(10s) == std::future_status::ready);

  const std::string claim_sql =
      "SELECT status, attempts, claim_token::text, lease_expires_at::text, "
      "available_at::text, updated_at::text FROM {schema}.inbox_receipts";
  const auto before = db.query(claim_sql)[0];
  REQUIRE(before[0].as<std::string>() == "PROCESSING");
  REQUIRE(before[1].as<int>() == 1);

  const Receipt again = inbox.accept(order("m-1"));
  CHECK(again.kind == Receipt::Kind::Duplicate);
  CHECK(again.id == first.id);
  CHECK(again.status == ReceiptStatus::Processing);
  const auto after = db.query(claim_sql)[0];
  for (int column = 0; column < 6; ++column)
    CHECK(std::string(after[column].c_str()) == std::string(before[column].c_str()));

  // The claim still holds: the worker's guarded completion commits.
  release.set_value();
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (db.query("SELECT status FROM {schema}.inbox_receipts")[0][0].as<std::string>() != "COMPLETED" &&
         std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(20ms);
  worker.stop();
  const auto done = db.query("SELECT status, attempts FROM {schema}.inbox_receipts")[0];
  CHECK(done[0].as<std::string>() == "COMPLETED");
  CHECK(done[1].as<int>() == 1);
  CHECK(calls == 1);
}

TEST_CASE("reusing an identity with different content throws IDENTITY_CONFLICT and keeps the record") {
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db));
  const Receipt first = inbox.accept(order("m-1"));
  try {
    inbox.accept(order("m-1", {{"orderId", "o-2"}}));
    FAIL("expected InboxConflictError");
  } catch (const InboxConflictError& e) {
    CHECK(e.code() == "IDENTITY_CONFLICT");
    CHECK(e.existing_id() == first.id);
  }
  auto other_type = order("m-1");
  other_type.event_type = "order.cancelled";
  CHECK_THROWS_AS(inbox.accept(other_type), InboxConflictError);
  auto other_version = order("m-1");
  other_version.schema_version = 2;
  CHECK_THROWS_AS(inbox.accept(other_version), InboxConflictError);
  CHECK(db.query("SELECT payload->>'orderId', event_type, schema_version FROM {schema}.inbox_receipts")[0][0]
            .as<std::string>() == "o-1");
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);
}

TEST_CASE("key order and metadata do not change the fingerprint, array order does") {
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db));
  inbox.accept(order("m-1", nlohmann::json::parse(R"({"a":1,"b":[1,2],"c":{"x":true,"y":null}})")));
  auto reordered = order("m-1", nlohmann::json::parse(R"({"c":{"y":null,"x":true},"b":[1,2],"a":1.0})"));
  reordered.metadata = {.traceparent = "00-other-01", .correlation_id = "different"};
  CHECK(inbox.accept(reordered).kind == Receipt::Kind::Duplicate);
  CHECK_THROWS_AS(inbox.accept(order("m-1", nlohmann::json::parse(R"({"a":1,"b":[2,1],"c":{"x":true,"y":null}})"))),
                  InboxConflictError);
}

TEST_CASE("each identity component distinguishes receipts") {
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db));
  const auto base = order("m-1");
  CHECK(inbox.accept(base).kind == Receipt::Kind::Accepted);
  auto other_tenant = base;
  other_tenant.scope = Scope::tenant("tenant-2");
  auto global = base;
  global.scope = Scope::global();
  auto other_source = base;
  other_source.source = "legacy-orders";
  auto other_consumer = base;
  other_consumer.consumer = "audit.v1";
  auto other_message = base;
  other_message.message_id = "m-2";
  for (const auto* r : {&other_tenant, &global, &other_source, &other_consumer, &other_message})
    CHECK(inbox.accept(*r).kind == Receipt::Kind::Accepted);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 6);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_kind = 'global' AND scope_id = ''") == 1);
}

TEST_CASE("the same identity accepted from 16 connections at once gives one accepted and fifteen duplicates") {
  TestDatabase db;
  for (int round = 0; round < 20; ++round) {
    auto pool = ConnectionPool::create({.url = db.url(), .size = 16});
    Inbox inbox(pool, options_for(db));
    // Open all 16 connections first, so the race is on the insert, not on connecting.
    {
      std::vector<PooledConnection> warm;
      for (int i = 0; i < 16; ++i) warm.push_back(pool->acquire());
    }
    std::atomic<int> ready{0};
    std::atomic<int> accepted{0};
    std::atomic<int> duplicates{0};
    std::atomic<int> errors{0};
    std::vector<std::thread> threads;
    const std::string id = "race-" + std::to_string(round);
    for (int i = 0; i < 16; ++i) {
      threads.emplace_back([&] {
        ++ready;
        while (ready < 16) std::this_thread::yield();
        try {
          const auto r = inbox.accept(order(id));
          (r.kind == Receipt::Kind::Accepted ? accepted : duplicates)++;
        } catch (...) {
          ++errors;
        }
      });
    }
    for (auto& t : threads) t.join();
    REQUIRE(errors == 0);
    REQUIRE(accepted == 1);
    REQUIRE(duplicates == 15);
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 20);
}

TEST_CASE("accept notifies listeners on the inbox channel after it commits") {
  TestDatabase db;
  Inbox inbox(db.pool(), options_for(db, true));
  pqxx::connection listener(db.url());

  struct Receiver : pqxx::notification_receiver {
    using notification_receiver::notification_receiver;
    std::vector<std::string> payloads;
    void operator()(const std::string& payload, int) override { payloads.push_back(payload); }
  } receiver(listener, Inbox::notify_channel(db.schema()));
  listener.get_notifs();

  inbox.accept(order("m-1"));
  for (int i = 0; i < 50 && receiver.payloads.empty(); ++i) listener.await_notification(0, 100000);
  REQUIRE(receiver.payloads.size() == 1);
  CHECK(receiver.payloads[0] == kConsumer);

  // A duplicate has nothing new to process: no wake-up.
  inbox.accept(order("m-1"));
  listener.await_notification(0, 300000);
  CHECK(receiver.payloads.size() == 1);
}
