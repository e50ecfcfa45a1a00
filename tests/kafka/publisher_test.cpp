// The publisher against librdkafka's mock cluster over loopback TCP, read back with a
// real consumer. Invariants are checked by counting rows and records.
#include <catch2/catch.hpp>

#include <librdkafka/rdkafka.h>

#include <set>
#include <thread>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/outbox/reserved_headers.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "exposition.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "publisher_options.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

struct Setup {
  TestDatabase db;
  MockKafka kafka;
  std::shared_ptr<ConnectionPool> pool = db.pool(6);
  OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = true}};
  Setup() {
    kafka.create_topic("orders", 4);
    kafka.create_topic("audit", 2);
  }
  PublisherOptions options() const { return fast_publisher_options(db.schema(), kafka); }
  // Emits `count` events, one transaction each; returns their event ids.
  std::set<std::string> emit(int count, int offset = 0) {
    std::set<std::string> ids;
    for (int i = offset; i < offset + count; ++i) {
      Tx tx = pool->begin();
      ids.insert(
          outbox
              .emit(tx,
                    OutboxMessage{
                        .event_type = "order.projected", .schema_version = 1, .topic = "orders", .payload = {{"n", i}}},
                    {.scope = Scope::tenant("tenant-" + std::to_string(i % 5)),
                     .causation_id = "cause-" + std::to_string(i)})
              .event_id);
      tx.commit();
    }
    return ids;
  }
  std::int64_t count(const std::string& status) const {
    return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = '" + status + "'");
  }
};

std::set<std::string> event_ids(const std::vector<KafkaRecordRead>& records) {
  std::set<std::string> ids;
  for (const auto& r : records) ids.insert(r.headers.at("event_id"));
  return ids;
}

}  // namespace

TEST_CASE("the publisher delivers emitted events with their stable id, key and headers, then marks them published") {
  Setup s;
  const auto ids = s.emit(50);
  {
    Tx tx = s.pool->begin();
    s.outbox.emit(
        tx,
        OutboxMessage{
            .event_type = "order.audited", .schema_version = 2, .topic = "orders", .payload = {{"audit", true}}},
        {.scope = Scope::global(),
         .correlation_id = "corr-1",
         .key = "k-1",
         .headers = {{"x-origin", "test"}},
         .traceparent = "00-abc-def-01"});
    tx.commit();
  }
  auto options = s.options();
  options.topic_overrides = {{"order.audited", "audit"}};
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 51);
  CHECK(s.count("PUBLISHED") == 51);
  CHECK(publisher.stats().delivered == 51);

  const auto records = s.kafka.read_all("orders", 50, 20s);
  REQUIRE(records.size() == 50);
  CHECK(event_ids(records) == ids);
  for (const auto& r : records) {
    const auto row =
        s.db.query("SELECT tenant_id, payload, causation_id FROM {schema}.outbox_events WHERE event_id = '" +
                   r.headers.at("event_id") + "'");
    REQUIRE(row.size() == 1);
    CHECK(r.key == row[0][0].as<std::string>());  // default key: the tenant id
    CHECK(r.value == row[0][1].as<std::string>());
    CHECK(r.headers.at("causation_id") == row[0][2].as<std::string>());
    CHECK(r.headers.at("event_type") == "order.projected");
    CHECK(r.headers.at("schema_version") == "1");
    CHECK(r.headers.at("tenant_scope") == "tenant");
    CHECK(r.headers.at("tenant_id") == row[0][0].as<std::string>());
  }
  const auto audit = s.kafka.read_all("audit", 1, 20s);
  REQUIRE(audit.size() == 1);
  CHECK(audit[0].key == "k-1");
  CHECK(audit[0].value == R"({"audit":true})");
  CHECK(audit[0].headers.at("tenant_scope") == "global");
  CHECK(audit[0].headers.count("tenant_id") == 0);
  CHECK(audit[0].headers.at("correlation_id") == "corr-1");
  CHECK(audit[0].headers.at("traceparent") == "00-abc-def-01");
  CHECK(audit[0].headers.at("x-origin") == "test");
  CHECK(audit[0].headers.at("schema_version") == "2");
}

TEST_CASE("a batch whose events lie in three partitions is marked published whole, under generic plans too") {
  Setup s;
  s.emit(15);
  // A third of them two days on (the first daily partition), a third three days on: an
  // update of the partition key moves each row into the partition of its new id.
  s.db.execute(
      "UPDATE {schema}.outbox_events SET event_id = {schema}.outbox_event_id_floor(now() + interval '2 days' + id * "
      "interval '1 ms') WHERE id % 3 = 1");
  s.db.execute(
      "UPDATE {schema}.outbox_events SET event_id = {schema}.outbox_event_id_floor(now() + interval '3 days' + id * "
      "interval '1 ms') WHERE id % 3 = 2");
  REQUIRE(s.db.scalar("SELECT count(DISTINCT tableoid) FROM {schema}.outbox_events") == 3);
  std::set<std::string> ids;
  for (const auto& row : s.db.query("SELECT event_id FROM {schema}.outbox_events")) ids.insert(row[0].c_str());
  // Every statement of the publisher under its generic plan: the marks must prune by the
  // batch's id range and keep each partition the batch has events in.
  const auto url = s.db.url() + (s.db.url().find('?') == std::string::npos ? "?" : "&") +
                   "options=-c%20plan_cache_mode%3Dforce_generic_plan";
  const auto generic = ConnectionPool::create({.url = url, .size = 6});
  REQUIRE(pqxx::nontransaction(*generic->acquire()).exec1("SHOW plan_cache_mode")[0].as<std::string>() ==
          "force_generic_plan");
  Publisher publisher(generic, s.options());
  CHECK(publisher.drain() == 15);
  CHECK(s.count("PUBLISHED") == 15);
  const auto records = s.kafka.read_all("orders", 15, 20s);
  REQUIRE(records.size() == 15);
  CHECK(event_ids(records) == ids);
}

TEST_CASE("the publisher sets every reserved header on a tenant event that gives all optional fields") {
  Setup s;
  {
    Tx tx = s.pool->begin();
    s.outbox.emit(
        tx,
        OutboxMessage{.event_type = "order.projected", .schema_version = 3, .topic = "orders", .payload = {{"n", 1}}},
        {.scope = Scope::tenant("t-1"),
         .causation_id = "cause",
         .correlation_id = "corr",
         .headers = {{"x-origin", "test"}},
         .traceparent = "00-abc-def-01"});
    tx.commit();
  }
  Publisher publisher(s.pool, s.options());
  REQUIRE(publisher.drain() == 1);
  const auto records = s.kafka.read_all("orders", 1, 20s);
  REQUIRE(records.size() == 1);
  // The emitter rejects exactly these names as custom headers, because the publisher
  // writes each of them: one list (boxcar/outbox/reserved_headers.hpp) for both sides.
  for (const auto name : headers::kReserved) {
    INFO(name);
    CHECK(records[0].headers.count(std::string(name)) == 1);
  }
  CHECK(records[0].headers.size() == headers::kReserved.size() + 1);  // + x-origin
}

TEST_CASE("with every broker down nothing is marked published, and the backlog drains when they return") {
  Setup s;
  auto ids = s.emit(30);
  s.kafka.set_all_down(true);
  Publisher publisher(s.pool, s.options());
  publisher.start();
  // Two delivery timeouts' worth of attempts against a dead cluster.
  std::this_thread::sleep_for(5s);
  CHECK(s.count("PUBLISHED") == 0);
  CHECK(publisher.stats().delivered == 0);
  CHECK(publisher.stats().failed >= 30);
  auto more = s.emit(20, 30);  // the backlog grows while Kafka is down
  ids.insert(more.begin(), more.end());
  CHECK(s.count("PUBLISHED") == 0);

  s.kafka.set_all_down(false);
  CHECK(eventually([&] { return s.count("PUBLISHED") == 50; }, 60s));
  publisher.stop();
  const auto records = s.kafka.read_all("orders", 50, 20s);
  // At least once: every event arrived; duplicates (same id) are allowed, losses are not.
  CHECK(event_ids(records) == ids);
}

TEST_CASE("injected produce errors are retried until every event is delivered") {
  Setup s;
  const auto ids = s.emit(40);
  s.kafka.fail_next_produce_requests(8, RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS);
  s.kafka.fail_next_produce_requests(2, RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT);
  Publisher publisher(s.pool, s.options());
  publisher.start();
  CHECK(eventually([&] { return s.count("PUBLISHED") == 40; }, 60s));
  publisher.stop();
  CHECK(event_ids(s.kafka.read_all("orders", 40, 20s)) == ids);
}

TEST_CASE("a fatal idempotent-producer error recreates the producer and loses nothing") {
  Setup s;
  auto ids = s.emit(20);
  Publisher publisher(s.pool, s.options());
  CHECK(publisher.drain() == 20);
  publisher.raise_fatal_error_for_testing("test: out-of-order sequence");
  std::this_thread::sleep_for(200ms);  // the error callback runs on librdkafka's thread
  const auto more = s.emit(20, 20);
  ids.insert(more.begin(), more.end());
  for (int i = 0; i < 50 && s.count("PUBLISHED") < 40; ++i) {
    publisher.drain();
    std::this_thread::sleep_for(100ms);
  }
  CHECK(s.count("PUBLISHED") == 40);
  CHECK(publisher.stats().fatal_errors >= 1);
  CHECK(publisher.stats().producer_restarts >= 1);
  CHECK(event_ids(s.kafka.read_all("orders", 40, 20s)) == ids);
}

TEST_CASE("the readiness question kafka_connected() never waits for a batch awaiting its delivery reports") {
  Setup s;
  s.emit(5);
  s.kafka.set_all_down(true);
  auto options = s.options();
  options.delivery_timeout = 30s;  // the batch in flight holds the producer for 30 s
  options.lease = 40s;
  Publisher publisher(s.pool, options);
  publisher.start();
  REQUIRE(eventually([&] { return s.count("PUBLISHING") == 5; }, 20s));
  std::this_thread::sleep_for(200ms);  // the publishing thread is inside its await now
  REQUIRE(s.count("PUBLISHING") == 5);
  // Liveness bound, not a timing assertion: the metadata request gives up after 2 s;
  // before the fix the call waited out the 30 s await.
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(publisher.kafka_connected());
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(s.count("PUBLISHING") == 5);  // the batch was still in flight
  CHECK(publisher.heartbeat().age().has_value());
  s.kafka.set_all_down(false);
  publisher.stop();
}

TEST_CASE("an event whose deliveries keep failing becomes DEAD after max_attempts and is counted as dead") {
  Setup s;
  s.emit(3);
  // A permanent broker error answers every Produce request (far more than the attempts
  // use): each attempt fails at once, librdkafka does not retry it internally.
  s.kafka.fail_next_produce_requests(500, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  auto options = s.options();
  options.max_attempts = 3;
  options.metrics = std::make_shared<Metrics>();
  Publisher publisher(s.pool, options);
  publisher.start();
  CHECK(eventually([&] { return s.count("DEAD") == 3; }, 60s));
  publisher.stop();

  CHECK(s.count("PUBLISHED") == 0);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE attempts = 3 AND dead_reason = "
                    "'ATTEMPTS_EXHAUSTED' AND claim_token IS NULL AND last_error <> ''") == 3);
  CHECK(publisher.stats().dead == 3);
  CHECK(publisher.stats().failed == 6);
  const std::string text = options.metrics->serialize();
  INFO(text);
  CHECK(metric_value(text, "boxcar_publisher_events_total", {{"outcome", "dead"}, {"topic", "orders"}}) == 3);
  CHECK(metric_value(text, "boxcar_publisher_events_total", {{"outcome", "failed"}, {"topic", "orders"}}) == 6);
  CHECK(metric_value(text, "boxcar_publisher_events_total", {{"outcome", "delivered"}, {"topic", "orders"}}) == -1);
  CHECK(s.kafka.read_all("orders", 0, 5s).empty());
}

TEST_CASE("events whose claim expired with their attempts used up become DEAD and are counted as dead") {
  Setup s;
  s.emit(4);
  // A publisher claimed them for the last allowed time and died: PUBLISHING, lease in the past.
  s.db.query(
      "UPDATE {schema}.outbox_events SET status = 'PUBLISHING', attempts = 2, "
      "claim_token = gen_random_uuid(), lease_expires_at = now() - interval '1 second' WHERE id IN "
      "(SELECT id FROM {schema}.outbox_events ORDER BY id LIMIT 3)");
  auto options = s.options();
  options.max_attempts = 2;
  options.metrics = std::make_shared<Metrics>();
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 1);  // the fourth, never claimed, is published

  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'DEAD' AND "
                    "dead_reason = 'LEASE_EXPIRED_EXHAUSTED' AND attempts = 2") == 3);
  CHECK(s.count("PUBLISHED") == 1);
  CHECK(publisher.stats().lease_expired == 3);
  CHECK(publisher.stats().dead == 3);
  const std::string text = options.metrics->serialize();
  INFO(text);
  CHECK(metric_value(text, "boxcar_publisher_events_total", {{"outcome", "dead"}, {"topic", "orders"}}) == 3);
  CHECK(metric_value(text, "boxcar_publisher_events_total", {{"outcome", "delivered"}, {"topic", "orders"}}) == 1);
}

TEST_CASE("an idle publisher is woken by NOTIFY after the emitting transaction commits") {
  Setup s;
  auto options = s.options();
  options.poll_interval = 20s;
  Publisher publisher(s.pool, options);
  publisher.start();
  std::this_thread::sleep_for(500ms);  // idle now
  s.emit(1);
  CHECK(eventually([&] { return s.count("PUBLISHED") == 1; }, 5s));
  publisher.stop();
}

TEST_CASE("publisher configuration errors name the key") {
  Setup s;
  const auto expect = [&](PublisherOptions options, const std::string& key) {
    try {
      Publisher publisher(s.pool, options);
      FAIL("expected ConfigError " << key);
    } catch (const ConfigError& e) {
      CHECK(e.key() == key);
    }
  };
  auto o = s.options();
  o.kafka["enable.idempotence"] = "false";
  expect(o, "kafka.enable.idempotence");
  o = s.options();
  o.kafka["no.such.property"] = "1";
  expect(o, "kafka.no.such.property");
  o = s.options();
  o.lease = 3s;
  expect(o, "publisher.lease_ms");
  o = s.options();
  o.batch_size = 0;
  expect(o, "publisher.batch_size");
}
