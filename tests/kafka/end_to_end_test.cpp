// The whole shape: accepted into an inbox, handled with one business row and one emitted
// event in context.tx, published to Kafka, accepted into a second consumer's inbox keyed
// by the event id, where a redelivery of the record is a duplicate.
#include <catch2/catch.hpp>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "order_events.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

class OrderProjection final : public InboxHandler {
 public:
  OrderProjection(OutboxEmitter& outbox, std::string table) : outbox_(outbox), table_(std::move(table)) {}
  void handle(const nlohmann::json& payload, HandlerContext& context) override {
    const std::string order_id = payload.at("orderId");
    context.tx.exec("INSERT INTO " + table_ + " (tenant_id, order_id) VALUES ($1, $2)", context.scope.id, order_id);
    outbox_.emit(context.tx, OrderProjected{order_id}, {.scope = context.scope, .causation_id = context.message_id});
  }

 private:
  OutboxEmitter& outbox_;
  std::string table_;
};

// A global event carries no tenant header: its scope comes from tenant_scope alone.
Scope scope_of(const KafkaRecordRead& record) {
  if (record.headers.at("tenant_scope") == "global") return Scope::global();
  return Scope::tenant(record.headers.at("tenant_id"));
}

AcceptRequest from_record(const KafkaRecordRead& record) {
  // The scope headers are trusted as in examples/orders' downstream: only the Boxcar
  // publisher may write the topic (its ACL), and it copies the authenticated receipt's scope.
  return {.scope = scope_of(record),
          .source = "kafka:" + record.topic,
          .consumer = "downstream.v1",
          .message_id = record.headers.at("event_id"),
          .event_type = record.headers.at("event_type"),
          .schema_version = std::stoi(record.headers.at("schema_version")),
          .payload = nlohmann::json::parse(record.value),
          .metadata = {.causation_id = record.headers.at("causation_id")}};
}

}  // namespace

TEST_CASE("accept, handle with one row and one event, publish, and deduplicate downstream by event id") {
  // A tenant's message and an intentionally global one take the same path: the handler
  // passes context.scope through, and the downstream identity keeps that scope.
  const Scope scope = GENERATE(Scope::tenant("tenant-7"), Scope::global());
  CAPTURE(to_string(scope.kind));
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders.projected", 2);
  db.query("CREATE TABLE {schema}.order_projection (tenant_id text NOT NULL, order_id text NOT NULL)");
  auto pool = db.pool(8);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"orders.projection.v1", "downstream.v1"}, .notify = false});
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false});

  const Receipt accepted = inbox.accept({.scope = scope,
                                         .source = "orders-service",
                                         .consumer = "orders.projection.v1",
                                         .message_id = "evt-1001",
                                         .event_type = "order.created",
                                         .schema_version = 1,
                                         .payload = {{"orderId", "o-42"}}});
  REQUIRE(accepted.kind == Receipt::Kind::Accepted);

  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"orders.projection.v1", "downstream.v1"},
                 .owned_consumers = {"orders.projection.v1"}},
                {{.consumer = "orders.projection.v1",
                  .supports = {{"order.created", 1}},
                  .handler = std::make_shared<OrderProjection>(outbox, db.qualified("{schema}.order_projection"))}});
  CHECK(worker.drain() == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.order_projection") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 1);

  Publisher publisher(
      pool,
      {.schema = db.schema(), .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}}, .delivery_timeout = 5s});
  CHECK(publisher.drain() == 1);

  const auto records = kafka.read_all("orders.projected", 1, 20s);
  REQUIRE(records.size() == 1);
  const std::string event_id = db.query("SELECT event_id::text FROM {schema}.outbox_events")[0][0].as<std::string>();
  CHECK(records[0].headers.at("event_id") == event_id);
  CHECK(records[0].headers.at("causation_id") == "evt-1001");

  const Receipt downstream = inbox.accept(from_record(records[0]));
  CHECK(downstream.kind == Receipt::Kind::Accepted);
  // The broker redelivers the same record: the downstream inbox recognises it.
  const Receipt redelivered = inbox.accept(from_record(records[0]));
  CHECK(redelivered.kind == Receipt::Kind::Duplicate);
  CHECK(redelivered.id == downstream.id);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE consumer = 'downstream.v1'") == 1);
  const auto identity =
      db.query("SELECT scope_kind, scope_id FROM {schema}.inbox_receipts WHERE consumer = 'downstream.v1'")[0];
  CHECK(identity[0].as<std::string>() == to_string(scope.kind));
  CHECK(identity[1].as<std::string>() == scope.id);
}
