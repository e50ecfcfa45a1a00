// A row the emitter never writes (headers set by SQL, as a bad writer would) against
// librdkafka's mock cluster: that event alone is DEAD with RECORD_MALFORMED and a reason
// naming the field, and the rest of its batch is delivered at its first claim
// (docs/publisher.md). Checked by counting rows and records.
#include <catch2/catch.hpp>

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
  Setup() { kafka.create_topic("orders", 2); }

  void emit(int n) {
    OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = false}};
    emit_one(outbox, {.event_type = "order.projected", .schema_version = 1, .topic = "orders", .payload = {{"n", n}}},
             {.scope = Scope::tenant("tenant-1"), .headers = {{"source", "test"}}});
  }
  // Overwrites the headers of the event whose payload has n, as SQL outside the emitter can.
  void set_headers(int n, const std::string& headers_json) {
    db.query("UPDATE {schema}.outbox_events SET headers = '" + headers_json +
             "'::jsonb WHERE payload = '{\"n\":" + std::to_string(n) + "}'");
  }
};

}  // namespace

TEST_CASE(
    "a batch with rows whose headers the emitter never writes delivers the others at once, and each bad row alone "
    "is DEAD with RECORD_MALFORMED naming the field") {
  Setup s;
  for (int n = 1; n <= 8; ++n) s.emit(n);
  s.set_headers(2, R"({"source": 42})");           // a non-string value
  s.set_headers(4, R"(["source", "test"])");       // not an object
  s.set_headers(6, R"({"event_id": "spoofed"})");  // a name the publisher sets itself
  auto options = fast_publisher_options(s.db.schema(), s.kafka);
  options.metrics = s.metrics;
  Publisher publisher(s.pool, options);

  CHECK(publisher.drain() == 8);  // one claim of all eight, nothing thrown back

  CHECK(s.count("status = 'PUBLISHED' AND attempts = 1") == 5);
  CHECK(s.count("status = 'DEAD' AND dead_reason = 'RECORD_MALFORMED' AND attempts = 1") == 3);
  CHECK(
      s.count("dead_reason = 'RECORD_MALFORMED' AND payload = '{\"n\":2}' AND "
              "last_error = 'RECORD_MALFORMED: OUTBOX_FIELD_INVALID headers/source: must be a string, found number'") ==
      1);
  CHECK(s.count("dead_reason = 'RECORD_MALFORMED' AND payload = '{\"n\":4}' AND "
                "last_error LIKE 'RECORD_MALFORMED: OUTBOX_FIELD_INVALID headers: must be a JSON object%'") == 1);
  CHECK(s.count("dead_reason = 'RECORD_MALFORMED' AND payload = '{\"n\":6}' AND "
                "last_error LIKE 'RECORD_MALFORMED: OUTBOX_FIELD_INVALID headers/event_id: reserved%'") == 1);
  CHECK(publisher.stats().delivered == 5);
  CHECK(publisher.stats().dead == 3);
  const Exposition e(s.metrics->serialize());
  CHECK(e.value("boxcar_publisher_events_total", {{"topic", "orders"}, {"outcome", "dead"}}) == 3);
  CHECK(e.value("boxcar_publisher_events_total", {{"topic", "orders"}, {"outcome", "delivered"}}) == 5);

  // Counted in Kafka: the five good records, each with the emit's header; nothing spoofed.
  const auto records = s.kafka.read_all("orders", 5, 20s);
  CHECK(records.size() == 5);
  for (const auto& record : records) {
    CHECK(record.headers.at("source") == "test");
    CHECK(record.headers.at("event_id") != "spoofed");
  }
}
