// The publisher's retry statement with a long-failing event: its backoff must stay
// computable however many attempts it spent (librdkafka's mock cluster over TCP).
#include <catch2/catch.hpp>

#include <librdkafka/rdkafka.h>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

TEST_CASE("a failed delivery after more than a thousand attempts is retried with the capped backoff") {
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders", 2);
  auto pool = db.pool(4);
  OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = false}};
  {
    Tx tx = pool->begin();
    outbox.emit(tx, OutboxMessage{.event_type = "e", .schema_version = 1, .topic = "orders", .payload = {{"n", 1}}},
                {.scope = Scope::tenant("t")});
    tx.commit();
  }
  // 2^1500 overflows a double: power(2, attempts - 1) failed the whole statement.
  db.query("UPDATE {schema}.outbox_events SET attempts = 1500");
  kafka.fail_next_produce_requests(100, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  Publisher publisher(pool, {.schema = db.schema(),
                             .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}},
                             .lease = 8s,
                             .delivery_timeout = 2s,
                             .backoff = {.base = 1min, .cap = 1min},
                             .poll_interval = 100ms});
  CHECK_NOTHROW(publisher.drain());
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'RETRYABLE' AND attempts = 1501 "
                  "AND claim_token IS NULL AND available_at <= now() + interval '1 minute'") == 1);
  CHECK(publisher.stats().failed == 1);
}
