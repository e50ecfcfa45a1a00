// The publisher's budgets against librdkafka's mock cluster over loopback TCP: bytes in
// flight, the record size limit shared with the emitter, and the bounded life of an
// event that can never be delivered. Invariants are checked by counting rows and records.
#include <catch2/catch.hpp>

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <mutex>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "publisher_options.hpp"
#include "outbox_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

struct Setup : OutboxFixture {
  Setup() { kafka.create_topic("orders", 4); }
  PublisherOptions options() const { return fast_publisher_options(db.schema(), kafka); }
  // Emits `count` events whose payload pads to `bytes`, one transaction each.
  void emit(int count, std::size_t bytes, OutboxEmitter* emitter = nullptr) {
    OutboxEmitter own{pool, {.schema = db.schema(), .notify = false}};
    OutboxEmitter& outbox = emitter ? *emitter : own;
    for (int i = 0; i < count; ++i) {
      Tx tx = pool->begin();
      outbox.emit(tx,
                  OutboxMessage{.event_type = "order.projected",
                                .schema_version = 1,
                                .topic = "orders",
                                .payload = {{"n", i}, {"pad", std::string(bytes, 'x')}}},
                  {.scope = Scope::tenant("tenant-" + std::to_string(i % 3))});
      tx.commit();
    }
  }
};

}  // namespace

TEST_CASE("the publisher never holds more record bytes in flight than max_in_flight_bytes, and delivers everything") {
  Setup s;
  s.emit(40, 2000);  // records of about 2.2 kB
  auto options = s.options();
  options.max_in_flight_batches = 4;
  options.max_in_flight_bytes = 10'000;
  std::mutex mutex;
  std::size_t largest_batch = 0;
  options.on_delivered = [&](const std::vector<std::string>& ids) {
    std::lock_guard lock(mutex);
    largest_batch = std::max(largest_batch, ids.size());
  };
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 40);
  CHECK(s.count("status = 'PUBLISHED'") == 40);
  CHECK(s.kafka.read_all("orders", 40, 20s).size() >= 40);
  const auto stats = publisher.stats();
  CHECK(stats.peak_in_flight_bytes > 0);
  CHECK(stats.peak_in_flight_bytes <= 10'000);
  CHECK(largest_batch <= 4);  // 100 per batch without the byte budget
  CHECK(largest_batch >= 1);
}

TEST_CASE("an event larger than max_in_flight_bytes is still delivered, alone") {
  Setup s;
  s.emit(3, 5000);
  auto options = s.options();
  options.max_in_flight_bytes = 1000;
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 3);
  CHECK(s.count("status = 'PUBLISHED'") == 3);
  CHECK(publisher.stats().peak_in_flight_bytes < 2 * 5400);  // one record at a time
}

TEST_CASE("an event just within the emitter's record limit is produced: both ends measure it the same way") {
  Setup s;
  OutboxEmitter outbox{s.pool, {.schema = s.db.schema(), .notify = false}};
  // Find the largest padding the emitter accepts, to within 64 bytes of the limit.
  std::size_t pad = 999'000;
  while (true) {
    Tx tx = s.pool->begin();
    try {
      outbox.emit(tx,
                  OutboxMessage{.event_type = "order.projected",
                                .schema_version = 1,
                                .topic = "orders",
                                .payload = {{"n", 0}, {"pad", std::string(pad + 64, 'x')}}},
                  {.scope = Scope::tenant("tenant-0")});
      pad += 64;
    } catch (const OutboxValidationError& e) {
      CHECK(e.code() == "OUTBOX_EVENT_TOO_LARGE");
      break;
    }
  }
  s.emit(1, pad, &outbox);
  Publisher publisher(s.pool, s.options());  // message.max.bytes left at its default
  CHECK(publisher.drain() == 1);
  CHECK(s.count("status = 'PUBLISHED'") == 1);
  const auto records = s.kafka.read_all("orders", 1, 20s);
  REQUIRE(records.size() == 1);
  CHECK(records[0].value.size() > pad);
}

TEST_CASE("a record the producer refuses as too large is DEAD at once with RECORD_TOO_LARGE, the others delivered") {
  Setup s;
  // An emitter configured for larger records than this publisher's producer accepts.
  OutboxEmitter generous{s.pool,
                         {.schema = s.db.schema(),
                          .payload_limits = {.max_bytes = 4'000'000},
                          .max_record_bytes = 4'000'000,
                          .notify = false}};
  s.emit(2, 10);
  s.emit(1, 1'500'000, &generous);
  s.emit(2, 10);
  auto options = s.options();
  options.max_attempts = 0;  // retry forever: only the permanent refusal may end it
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 5);
  CHECK(s.count("status = 'PUBLISHED'") == 4);
  CHECK(s.count("status = 'DEAD' AND dead_reason = 'RECORD_TOO_LARGE' AND attempts = 1 AND last_error <> ''") == 1);
  CHECK(publisher.stats().dead == 1);
}

TEST_CASE("by default an event that can never be delivered ends DEAD once older than max_age") {
  Setup s;
  const PublisherOptions defaults{};
  CHECK(defaults.max_age > 0ms);  // bounded without any configuration
  CHECK(defaults.max_age <= std::chrono::hours(24 * 30));
  CHECK(defaults.max_attempts == 0);
  s.emit(3, 10);
  // Two were emitted long ago (older than the default max age) and one just now.
  s.db.query(
      "UPDATE {schema}.outbox_events SET created_at = now() - interval '8 days' WHERE id IN "
      "(SELECT id FROM {schema}.outbox_events ORDER BY id LIMIT 2)");
  s.kafka.fail_next_produce_requests(100, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  auto options = s.options();
  options.max_age = defaults.max_age;
  options.backoff = {.base = 1min, .cap = 1min};
  Publisher publisher(s.pool, options);
  publisher.drain();
  CHECK(s.count("status = 'DEAD' AND dead_reason = 'MAX_AGE_EXCEEDED' AND attempts = 1") == 2);
  CHECK(s.count("status = 'RETRYABLE'") == 1);
}

TEST_CASE("an expired claim of an event older than max_age ends DEAD with MAX_AGE_EXCEEDED") {
  Setup s;
  s.emit(2, 10);
  // A publisher claimed both and died; one of them is older than the max age.
  s.db.query(
      "UPDATE {schema}.outbox_events SET status = 'PUBLISHING', attempts = 1, claim_token = gen_random_uuid(), "
      "lease_expires_at = now() - interval '1 second'");
  s.db.query(
      "UPDATE {schema}.outbox_events SET created_at = now() - interval '2 hours' WHERE id = "
      "(SELECT min(id) FROM {schema}.outbox_events)");
  auto options = s.options();
  options.max_age = 1h;
  Publisher publisher(s.pool, options);
  CHECK(publisher.drain() == 1);
  CHECK(s.count("status = 'DEAD' AND dead_reason = 'MAX_AGE_EXCEEDED'") == 1);
  CHECK(s.count("status = 'PUBLISHED'") == 1);
}
