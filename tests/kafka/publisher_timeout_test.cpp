// One batch's delivery timeout against librdkafka's mock cluster, with one partition's
// leader down: only that batch's events are charged, and the batches in flight beside it
// or claimed after it are delivered at their first attempt (docs/publisher.md).
// Checked by counting rows and records.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "publisher_options.hpp"
#include "outbox_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

struct Setup : OutboxFixture {
  Setup() : OutboxFixture(2) {
    // One topic led by each broker: broker 2 goes down, broker 1 stays up.
    kafka.create_topic("healthy", 1);
    kafka.create_topic("stuck", 1);
    kafka.set_partition_leader("healthy", 0, 1);
    kafka.set_partition_leader("stuck", 0, 2);
  }
  void emit(const std::string& topic, const std::string& id) {
    OutboxEmitter outbox{pool, {.schema = db.schema()}};
    emit_one(outbox, {.event_type = "thing.happened", .schema_version = 1, .topic = topic, .payload = {{"id", id}}},
             {.scope = Scope::global()});
  }
};

}  // namespace

TEST_CASE(
    "a batch whose delivery times out charges only its own events: the batches beside it and after it are "
    "delivered at their first attempt") {
  Setup s;
  Publisher publisher(s.pool, fast_publisher_options(s.db.schema(), s.kafka));  // delivery_timeout 2 s
  publisher.start();
  // Both topics known to the producer before the fault.
  s.emit("healthy", "warm-h");
  s.emit("stuck", "warm-s");
  REQUIRE(eventually([&] { return s.count("status = 'PUBLISHED'") == 2; }, 30s));

  s.kafka.set_broker_down(2, true);
  s.emit("stuck", "x");
  REQUIRE(eventually([&] { return s.count("topic = 'stuck' AND status = 'PUBLISHING'") == 1; }, 10s));
  // A steady stream for the healthy topic while that batch waits out its delivery timeout
  // (2 s, and 2 s more for its reports) and after it: claimed in batches beside it and
  // after its deadline, each delivered within moments.
  for (int i = 0; i < 40; ++i) {
    s.emit("healthy", "h-" + std::to_string(i));
    std::this_thread::sleep_for(200ms);
  }
  CHECK(eventually([&] { return s.count("topic = 'healthy' AND status = 'PUBLISHED'") == 41; }, 60s));
  INFO("healthy events charged more than one attempt: " << s.count("topic = 'healthy' AND attempts > 1"));
  CHECK(s.count("topic = 'healthy' AND attempts > 1") == 0);
  // The timed-out event was charged and is retried.
  CHECK(s.count("topic = 'stuck' AND status <> 'PUBLISHED' AND attempts >= 1") == 1);
  publisher.stop();
  CHECK(s.kafka.read_all("healthy", 41, 20s).size() == 41);
}
