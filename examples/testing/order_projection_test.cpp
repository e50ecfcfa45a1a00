// How an application tests its own handler with boxcar::testing: a real PostgreSQL, an
// isolated schema, the real Inbox and Worker, no Kafka (events are captured instead).
#include <catch2/catch.hpp>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/testing/testing.hpp"

namespace {

// The application code under test.
struct OrderProjected {
  static constexpr std::string_view event_type = "order.projected";
  static constexpr int schema_version = 1;
  static constexpr std::string_view topic = "orders.projected";
  std::string order_id;
};
void to_json(nlohmann::json& j, const OrderProjected& e) { j = {{"orderId", e.order_id}}; }

class OrderProjection final : public boxcar::InboxHandler {
 public:
  OrderProjection(boxcar::OutboxEmitter& outbox, std::string table) : outbox_(outbox), table_(std::move(table)) {}
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    const std::string order_id = payload.at("orderId");
    if (order_id.empty()) throw boxcar::InboxPermanentError("an order needs an id");
    context.tx.exec("INSERT INTO " + table_ + " (tenant_id, order_id) VALUES ($1, $2)", context.scope.id, order_id);
    outbox_.emit(context.tx, OrderProjected{order_id}, {.scope = context.scope, .causation_id = context.message_id});
  }

 private:
  boxcar::OutboxEmitter& outbox_;
  std::string table_;
};

boxcar::AcceptRequest order(const std::string& id, const std::string& order_id) {
  return {.scope = boxcar::Scope::tenant("tenant-7"),
          .source = "orders-service",
          .consumer = "orders.projection.v1",
          .message_id = id,
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", order_id}}};
}

// What every test needs: its own schema with the application's table, and the real
// Inbox, OutboxEmitter and Worker wired as the application wires them. The schema is a
// copy of a migrated template database, in a database of its own: no migration per test.
struct App {
  boxcar::testing::TestSchema db{"", {.from_template = true}};
  boxcar::Inbox inbox{db.pool(), {.schema = db.schema(), .consumers = {"orders.projection.v1"}, .notify = false}};
  boxcar::OutboxEmitter outbox{db.pool(), {.schema = db.schema(), .notify = false}};
  boxcar::Worker worker{db.pool(),
                        {.schema = db.schema(), .consumers = {"orders.projection.v1"}},
                        {{.consumer = "orders.projection.v1",
                          .supports = {{"order.created", 1}},
                          .handler = std::make_shared<OrderProjection>(
                              outbox, boxcar::quote_identifier(db.schema()) + ".order_projection")}}};
  App() { db.execute("CREATE TABLE {schema}.order_projection (tenant_id text NOT NULL, order_id text NOT NULL)"); }
};

}  // namespace

TEST_CASE("an accepted order is projected once, emits one event, and a redelivery changes nothing") {
  App app;
  auto& [db, inbox, outbox, worker] = app;

  inbox.accept(order("evt-1", "o-42"));
  CHECK(boxcar::testing::drain(worker) == 1);
  CHECK(boxcar::testing::receipt_state(db, order("evt-1", "o-42"))->status == boxcar::ReceiptStatus::Completed);
  CHECK(db.count("SELECT count(*) FROM {schema}.order_projection WHERE order_id = 'o-42'") == 1);

  const auto events = boxcar::testing::capture_published(db);
  REQUIRE(events.size() == 1);
  CHECK(events[0].event_type == "order.projected");
  CHECK(events[0].payload == nlohmann::json{{"orderId", "o-42"}});
  CHECK(events[0].causation_id == "evt-1");
  CHECK(events[0].key == "tenant-7");

  CHECK(boxcar::testing::redeliver(inbox, order("evt-1", "o-42")).kind == boxcar::Receipt::Kind::Duplicate);
  CHECK(boxcar::testing::drain(worker) == 0);
  CHECK(db.count("SELECT count(*) FROM {schema}.order_projection") == 1);
  CHECK(boxcar::testing::capture_published(db).empty());
}

TEST_CASE("an order without an id is DEAD at once and projects nothing") {
  App app;
  auto& [db, inbox, outbox, worker] = app;
  inbox.accept(order("evt-2", ""));
  boxcar::testing::drain(worker);
  const auto state = boxcar::testing::receipt_state(db, order("evt-2", ""));
  REQUIRE(state);
  CHECK(state->status == boxcar::ReceiptStatus::Dead);
  CHECK(state->dead_reason == "HANDLER_PERMANENT");
  CHECK(state->last_error == "an order needs an id");
  CHECK(db.count("SELECT count(*) FROM {schema}.order_projection") == 0);
  CHECK(boxcar::testing::capture_published(db).empty());
}
