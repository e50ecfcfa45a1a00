// publisher.allowed_topics against librdkafka's mock cluster over loopback TCP: an event
// for a topic outside the set is DEAD and never produced, the rest of its batch is
// delivered (docs/security.md, section 3). Checked by counting rows and records.
#include <catch2/catch.hpp>

#include "boxcar/core/error.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "exposition.hpp"
#include "publisher_options.hpp"
#include "outbox_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

struct Setup : OutboxFixture {
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  Setup() {
    for (const char* topic : {"orders", "billing", "audit", "audit.raw"}) kafka.create_topic(topic, 2);
  }
  PublisherOptions options() const {
    auto o = fast_publisher_options(db.schema(), kafka);
    o.metrics = metrics;
    return o;
  }
  // Emits one event of `type` for `topic` in one transaction, as a handler (or a role
  // able to insert into the outbox) would.
  void emit(const std::string& type, const std::string& topic, int n) {
    OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = false}};
    emit_one(outbox, {.event_type = type, .schema_version = 1, .topic = topic, .payload = {{"n", n}}},
             {.scope = Scope::tenant("tenant-1")});
  }
};

}  // namespace

TEST_CASE(
    "with publisher.allowed_topics an event for another topic is DEAD with TOPIC_NOT_ALLOWED and never produced, "
    "while the allowed events of its batch are delivered") {
  Setup s;
  s.emit("order.projected", "orders", 1);
  s.emit("invoice.issued", "billing", 2);  // a topic outside the set
  s.emit("order.projected", "orders", 3);
  s.emit("audit.entry", "audit.raw", 4);  // overridden to "audit", which is allowed
  s.emit("audit.leak", "audit", 5);       // overridden to "audit.raw", which is not
  s.emit("order.projected", "orders", 6);
  auto options = s.options();
  options.topic_overrides = {{"audit.entry", "audit"}, {"audit.leak", "audit.raw"}};
  options.allowed_topics = {"orders", "audit"};
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 6);

  CHECK(s.count("status = 'PUBLISHED'") == 4);
  CHECK(s.count("status = 'DEAD' AND dead_reason = 'TOPIC_NOT_ALLOWED' AND last_error LIKE 'TOPIC_NOT_ALLOWED: %'") ==
        2);
  CHECK(s.count("status = 'DEAD' AND event_type IN ('invoice.issued', 'audit.leak')") == 2);
  CHECK(publisher.stats().dead == 2);
  CHECK(publisher.stats().delivered == 4);
  // Counted in Kafka: the allowed records arrived, the refused topics got nothing.
  CHECK(s.kafka.read_all("orders", 3, 20s).size() == 3);
  CHECK(s.kafka.read_all("audit", 1, 20s).size() == 1);
  CHECK(s.kafka.read_all("billing", 1, 3s).empty());
  CHECK(s.kafka.read_all("audit.raw", 1, 3s).empty());
  // The refused topics add no series: their label is folded.
  const Exposition e(s.metrics->serialize());
  CHECK(e.value("boxcar_publisher_events_total", {{"topic", "(not allowed)"}, {"outcome", "dead"}}) == 2);
  CHECK_FALSE(e.value("boxcar_publisher_events_total", {{"topic", "billing"}, {"outcome", "dead"}}));
  CHECK(e.value("boxcar_publisher_events_total", {{"topic", "orders"}, {"outcome", "delivered"}}) == 3);
}

TEST_CASE("a batch whose every event is refused produces nothing and ends with every event DEAD") {
  Setup s;
  for (int i = 0; i < 3; ++i) s.emit("invoice.issued", "billing", i);
  auto options = s.options();
  options.allowed_topics = {"orders"};
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 3);
  CHECK(s.count("status = 'DEAD' AND dead_reason = 'TOPIC_NOT_ALLOWED'") == 3);
  CHECK(s.count("status <> 'DEAD'") == 0);
  CHECK(s.kafka.read_all("billing", 1, 3s).empty());
}

TEST_CASE("without publisher.allowed_topics every topic is produced, as before") {
  Setup s;
  s.emit("order.projected", "orders", 1);
  s.emit("invoice.issued", "billing", 2);
  Publisher publisher(s.pool, s.options());
  CHECK(publisher.drain() == 2);
  CHECK(s.count("status = 'PUBLISHED'") == 2);
  CHECK(s.kafka.read_all("billing", 1, 20s).size() == 1);
}

TEST_CASE("an empty topic name in publisher.allowed_topics is a ConfigError naming the key") {
  Setup s;
  auto options = s.options();
  options.allowed_topics = {"orders", ""};
  try {
    Publisher publisher(s.pool, options);
    FAIL("accepted");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "publisher.allowed_topics");
  }
}
