#include <catch2/catch.hpp>

#include <thread>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/outbox/reserved_headers.hpp"
#include "boxcar/core/uuid.hpp"
#include "worker_fixture.hpp"
#include "order_events.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

static_assert(OutboxEvent<OrderProjected>);
static_assert(!OutboxEvent<OutboxMessage>);

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = db.pool(8);
  Inbox inbox{pool, {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false}};
  OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = false}};
  Setup() { create_app_table(db); }
  std::int64_t outbox_rows() const { return db.scalar("SELECT count(*) FROM {schema}.outbox_events"); }
  WorkerOptions worker_options() const {
    return {.schema = db.schema(),
            .consumers = {"orders.v1"},
            .lease = 5s,
            .handler_timeout = 2s,
            .max_attempts = 1,
            .backoff = {.base = 0ms, .cap = 0ms},
            .poll_interval = 100ms};
  }
};

}  // namespace

TEST_CASE("an event emitted inside a handler commits together with the completion") {
  Setup s;
  s.inbox.accept(message("orders.v1", "m-1"));
  const std::string table = s.db.qualified("{schema}.app_rows");
  Worker worker(s.pool, s.worker_options(),
                {{.consumer = "orders.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json& payload, HandlerContext& c) {
                    insert_app_row(table, c);
                    s.outbox.emit(c.tx, OrderProjected{payload.at("id")},
                                  {.scope = c.scope, .causation_id = c.message_id, .correlation_id = "corr"});
                  })}});
  worker.drain();
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
  const auto row = s.db.query(
      "SELECT event_id::text, event_type, schema_version, topic, message_key, tenant_scope, "
      "tenant_id, causation_id, correlation_id, payload, status FROM {schema}.outbox_events")[0];
  CHECK(is_uuid_v7(row[0].as<std::string>()));
  CHECK(row[1].as<std::string>() == "order.projected");
  CHECK(row[2].as<int>() == 1);
  CHECK(row[3].as<std::string>() == "orders.projected");
  CHECK(row[4].as<std::string>() == "t1");  // key defaults to the tenant id
  CHECK(row[5].as<std::string>() == "tenant");
  CHECK(row[6].as<std::string>() == "t1");
  CHECK(row[7].as<std::string>() == "m-1");
  CHECK(row[8].as<std::string>() == "corr");
  CHECK(row[9].as<std::string>() == R"({"orderId":"m-1"})");  // canonical bytes, as published
  CHECK(row[10].as<std::string>() == "PENDING");
}

TEST_CASE("a handler that throws after emitting leaves no outbox row") {
  Setup s;
  s.inbox.accept(message("orders.v1", "m-1"));
  Worker worker(s.pool, s.worker_options(),
                {{.consumer = "orders.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    s.outbox.emit(c.tx, OrderProjected{"o-1"}, {.scope = c.scope});
                    throw std::runtime_error("after emit");
                  })}});
  worker.drain();
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 1);
  CHECK(s.outbox_rows() == 0);
}

TEST_CASE("a stale claim leaves no outbox row") {
  Setup s;
  s.inbox.accept(message("orders.v1", "m-1"));
  auto slow_options = s.worker_options();
  slow_options.handler_timeout = 1s;
  slow_options.lease = 2s;
  slow_options.max_attempts = 5;
  std::atomic<bool> emitted{false};
  Worker slow(ConnectionPool::create({.url = s.db.url(), .size = 6}), slow_options,
              {{.consumer = "orders.v1",
                .supports = {{"thing.happened", 1}},
                .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                  s.outbox.emit(c.tx, OrderProjected{"from-slow"}, {.scope = c.scope});
                  emitted = true;
                  std::this_thread::sleep_for(4s);  // past deadline and lease; another worker takes over
                })}});
  std::thread slow_thread([&] { slow.drain(); });
  while (!emitted) std::this_thread::sleep_for(10ms);
  auto fast_options = s.worker_options();
  fast_options.max_attempts = 5;
  Worker fast(ConnectionPool::create({.url = s.db.url(), .size = 6}), fast_options,
              {{.consumer = "orders.v1",
                .supports = {{"thing.happened", 1}},
                .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                  s.outbox.emit(c.tx, OrderProjected{"from-fast"}, {.scope = c.scope});
                })}});
  fast.start();
  slow_thread.join();
  const auto end = std::chrono::steady_clock::now() + 10s;
  while (s.outbox_rows() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
  fast.stop();
  CHECK(slow.stats().stale == 1);
  CHECK(s.outbox_rows() == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE payload LIKE '%from-fast%'") == 1);
}

TEST_CASE("a global-scope receipt emits a global event by passing context.scope through") {
  Setup s;
  auto request = message("orders.v1", "m-global");
  request.scope = Scope::global();
  s.inbox.accept(request);
  Worker worker(s.pool, s.worker_options(),
                {{.consumer = "orders.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    s.outbox.emit(c.tx, OrderProjected{"o-global"}, {.scope = c.scope});
                  })}});
  worker.drain();
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 1);
  const auto row = s.db.query("SELECT tenant_scope, tenant_id FROM {schema}.outbox_events")[0];
  CHECK(row[0].as<std::string>() == "global");
  CHECK(row[1].as<std::string>() == "");
}

TEST_CASE("a handler whose emit is rejected goes DEAD at once instead of spending its retries") {
  Setup s;
  s.inbox.accept(message("orders.v1", "m-misuse"));
  auto options = s.worker_options();
  options.max_attempts = 5;
  Worker worker(s.pool, options,
                {{.consumer = "orders.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    s.outbox.emit(c.tx, OrderProjected{"o-1"}, {.scope = Scope::tenant("")});
                  })}});
  worker.drain();
  const auto row = s.db.query("SELECT status, attempts, dead_reason, last_error FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "DEAD");
  CHECK(row[1].as<int>() == 1);
  CHECK(row[2].as<std::string>() == "HANDLER_PERMANENT");
  CHECK(row[3].as<std::string>().find("OUTBOX_TENANT_SCOPE_INVALID") != std::string::npos);
  CHECK(s.outbox_rows() == 0);
}

TEST_CASE(
    "with outbox.topics declared, an emit to another topic is refused with OUTBOX_TOPIC_UNKNOWN naming the topic, "
    "before anything is written") {
  Setup s;
  OutboxEmitter declared{s.pool, {.schema = s.db.schema(), .topics = {"orders.projected", "audit"}, .notify = false}};
  Tx tx = s.pool->begin();
  try {
    declared.emit(tx, OutboxMessage{.event_type = "order.projected", .schema_version = 1, .topic = "orders.projcted"},
                  {.scope = Scope::tenant("t1")});
    FAIL("expected OutboxValidationError OUTBOX_TOPIC_UNKNOWN");
  } catch (const OutboxValidationError& e) {
    CHECK(e.code() == "OUTBOX_TOPIC_UNKNOWN");
    CHECK(e.field() == "topic");
    CHECK_THAT(std::string(e.what()), Catch::Contains("orders.projcted") && Catch::Contains("outbox.topics"));
  }
  declared.emit(tx, OrderProjected{"o-1"}, {.scope = Scope::tenant("t1")});
  // Undeclared (the default): every topic, as before.
  s.outbox.emit(tx, OutboxMessage{.event_type = "e", .schema_version = 1, .topic = "orders.projcted"},
                {.scope = Scope::tenant("t1")});
  tx.commit();
  CHECK(s.outbox_rows() == 2);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE topic = 'orders.projected'") == 1);
  // A declared name Kafka would refuse is a configuration error, named by its key.
  try {
    OutboxEmitter bad{s.pool, {.schema = s.db.schema(), .topics = {"orders projected"}, .notify = false}};
    FAIL("expected ConfigError outbox.topics");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "outbox.topics");
  }
}

TEST_CASE(
    "a handler that emits to a misspelt topic fails its transaction: the receipt goes DEAD with "
    "OUTBOX_TOPIC_UNKNOWN and neither its row nor an event is written") {
  Setup s;
  OutboxEmitter declared{s.pool, {.schema = s.db.schema(), .topics = {"orders.projected"}, .notify = false}};
  s.inbox.accept(message("orders.v1", "m-typo"));
  auto options = s.worker_options();
  options.max_attempts = 5;
  const std::string table = s.db.qualified("{schema}.app_rows");
  Worker worker(s.pool, options,
                {{.consumer = "orders.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    declared.emit(c.tx,
                                  OutboxMessage{.event_type = "order.projected",
                                                .schema_version = 1,
                                                .topic = "order.projected",  // the event type, not the topic
                                                .payload = {{"orderId", "o-1"}}},
                                  {.scope = c.scope, .causation_id = c.message_id});
                  })}});
  worker.drain();
  const auto row = s.db.query("SELECT status, attempts, dead_reason, last_error FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<std::string>() == "DEAD");
  CHECK(row[1].as<int>() == 1);
  CHECK(row[2].as<std::string>() == "HANDLER_PERMANENT");
  CHECK_THAT(row[3].as<std::string>(), Catch::Contains("OUTBOX_TOPIC_UNKNOWN"));
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 0);
  CHECK(s.outbox_rows() == 0);
}

TEST_CASE("emit works in an application transaction outside any handler and rolls back with it") {
  Setup s;
  {
    Tx tx = s.pool->begin();
    const auto first = s.outbox.emit(tx, OrderProjected{"o-1"}, {.scope = Scope::tenant("t9")});
    const auto second = s.outbox.emit(
        tx, OutboxMessage{.event_type = "order.audited", .schema_version = 2, .topic = "audit", .payload = {{"n", 1}}},
        {.scope = Scope::global(), .key = "audit-key", .headers = {{"x-source", "batch-job"}}});
    CHECK(first.event_id < second.event_id);  // UUIDv7: time-ordered
    tx.commit();
  }
  {
    Tx tx = s.pool->begin();
    s.outbox.emit(tx, OrderProjected{"never"}, {.scope = Scope::tenant("t9")});
  }  // rolled back
  CHECK(s.outbox_rows() == 2);
  const auto global = s.db.query(
      "SELECT tenant_scope, tenant_id, message_key, headers->>'x-source' "
      "FROM {schema}.outbox_events WHERE event_type = 'order.audited'")[0];
  CHECK(global[0].as<std::string>() == "global");
  CHECK(global[1].as<std::string>() == "");
  CHECK(global[2].as<std::string>() == "audit-key");
  CHECK(global[3].as<std::string>() == "batch-job");
}

TEST_CASE("emit rejects bad input before writing anything, naming the field") {
  Setup s;
  Tx tx = s.pool->begin();
  const auto expect = [&](const OutboxMessage& m, const EmitOptions& o, const std::string& code,
                          const std::string& field) {
    try {
      s.outbox.emit(tx, m, o);
      FAIL("expected OutboxValidationError " << code);
    } catch (const OutboxValidationError& e) {
      CHECK(e.code() == code);
      CHECK(e.field() == field);
    }
  };
  const OutboxMessage ok{.event_type = "e", .schema_version = 1, .topic = "t", .payload = {{"a", 1}}};
  expect(ok, {}, "OUTBOX_TENANT_SCOPE_INVALID", "scope.id");
  expect(ok, {.scope = Scope{Scope::Kind::Global, "x"}}, "OUTBOX_TENANT_SCOPE_INVALID", "scope.id");
  auto m = ok;
  m.event_type = "";
  expect(m, {.scope = Scope::tenant("t")}, "OUTBOX_FIELD_REQUIRED", "event_type");
  m = ok;
  m.schema_version = 0;
  expect(m, {.scope = Scope::tenant("t")}, "OUTBOX_SCHEMA_VERSION_INVALID", "schema_version");
  m = ok;
  m.topic = "bad topic!";
  expect(m, {.scope = Scope::tenant("t")}, "OUTBOX_FIELD_INVALID", "topic");
  m = ok;
  m.payload = {{"n", std::numeric_limits<double>::infinity()}};
  expect(m, {.scope = Scope::tenant("t")}, "JSON_NON_FINITE_NUMBER", "payload/n");
  expect(ok, {.scope = Scope::tenant("t"), .headers = {{"event_id", "forged"}}}, "OUTBOX_FIELD_INVALID",
         "headers/event_id");
  // Every header the publisher sets itself, from the one shared list.
  for (const auto name : headers::kReserved)
    expect(ok, {.scope = Scope::tenant("t"), .headers = {{std::string(name), "forged"}}}, "OUTBOX_FIELD_INVALID",
           "headers/" + std::string(name));
  tx.commit();
  CHECK(s.outbox_rows() == 0);
}

TEST_CASE("an emit whose Kafka record could never be produced is refused at emit time, naming the payload") {
  Setup s;
  // Within the payload's own 1 MiB limit, but over the producer's message.max.bytes.
  const OutboxMessage big{
      .event_type = "e", .schema_version = 1, .topic = "t", .payload = {{"pad", std::string(999'990, 'x')}}};
  REQUIRE(s.outbox.options().max_record_bytes == kDefaultMaxRecordBytes);
  Tx tx = s.pool->begin();
  try {
    s.outbox.emit(tx, big, {.scope = Scope::tenant("t")});
    FAIL("expected OutboxValidationError");
  } catch (const OutboxValidationError& e) {
    CHECK(e.code() == "OUTBOX_EVENT_TOO_LARGE");
    CHECK(e.field() == "payload");
  }
  // The headers count too: a payload that fits alone is refused with large custom headers.
  const OutboxMessage fits{
      .event_type = "e", .schema_version = 1, .topic = "t", .payload = {{"pad", std::string(990'000, 'x')}}};
  CHECK_THROWS_AS(
      s.outbox.emit(tx, fits, {.scope = Scope::tenant("t"), .headers = {{"x-big", std::string(20'000, 'h')}}}),
      OutboxValidationError);
  s.outbox.emit(tx, fits, {.scope = Scope::tenant("t")});
  tx.commit();
  CHECK(s.outbox_rows() == 1);
  // The limit is the emitter's option, set to the producer's message.max.bytes.
  OutboxEmitter small{s.pool, {.schema = s.db.schema(), .max_record_bytes = 4096, .notify = false}};
  Tx tx2 = s.pool->begin();
  CHECK_THROWS_AS(
      small.emit(
          tx2,
          OutboxMessage{
              .event_type = "e", .schema_version = 1, .topic = "t", .payload = {{"pad", std::string(4096, 'x')}}},
          {.scope = Scope::tenant("t")}),
      OutboxValidationError);
  CHECK_THROWS_AS(OutboxEmitter(s.pool, {.schema = s.db.schema(), .max_record_bytes = 0, .notify = false}),
                  ConfigError);
}

TEST_CASE("emitted events are counted when their transaction commits, never when it rolls back") {
  TestDatabase db;
  auto metrics = std::make_shared<Metrics>();
  OutboxEmitter outbox(db.pool(), {.schema = db.schema(), .notify = false, .metrics = metrics});
  const auto emitted = [&] {
    const std::string text = metrics->serialize();
    const std::string prefix = R"(boxcar_outbox_emitted_total{event_type="order.projected",topic="orders.projected"} )";
    const auto at = text.find(prefix);
    return at == std::string::npos ? 0.0 : std::stod(text.substr(at + prefix.size()));
  };
  {
    Tx tx = db.pool()->begin();
    outbox.emit(tx, OrderProjected{"rolled-back"}, {.scope = Scope::tenant("t")});
  }
  CHECK(emitted() == 0);
  {
    Tx tx = db.pool()->begin();
    outbox.emit(tx, OrderProjected{"o-1"}, {.scope = Scope::tenant("t")});
    outbox.emit(tx, OrderProjected{"o-2"}, {.scope = Scope::tenant("t")});
    CHECK(emitted() == 0);  // not before the commit
    tx.commit();
  }
  CHECK(emitted() == 2);
}

TEST_CASE("event ids are UUIDv7 and sort in creation order") {
  std::string previous;
  for (int i = 0; i < 10000; ++i) {
    const auto id = uuid_v7();
    REQUIRE(is_uuid_v7(id));
    REQUIRE(id > previous);
    previous = id;
  }
}
