// The orders projection (projection.hpp) run by the real Worker against a fresh schema:
// tenant receipts become rows and events; a global receipt is refused by the handler's
// scope guard (DEAD, HANDLER_PERMANENT) and writes nothing. Counted in rows.
#include <catch2/catch.hpp>

#include "boxcar/testing/testing.hpp"
#include "projection.hpp"

namespace {

boxcar::AcceptRequest order(const std::string& id, boxcar::Scope scope) {
  return {.scope = std::move(scope),
          .source = orders::kOrdersSource,
          .consumer = orders::kProjection,
          .message_id = id,
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", "o-" + id}, {"total", 12.5}}};
}

// The schema with the application's table, and the real Inbox, OutboxEmitter and Worker
// wired as orders_demo wires them, with the handler or the batch handler.
struct App {
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox{db.pool(), {.schema = db.schema(), .consumers = {orders::kProjection}, .notify = false}};
  boxcar::OutboxEmitter outbox{db.pool(), {.schema = db.schema(), .notify = false}};
  std::unique_ptr<boxcar::Worker> worker;

  explicit App(bool batch) {
    db.execute(orders::projection_table_ddl(db.schema()));
    boxcar::HandlerRegistration registration{.consumer = orders::kProjection, .supports = {{"order.created", 1}}};
    if (batch)
      registration.batch_handler = std::make_shared<orders::OrderProjectionBatch>(outbox, db.schema());
    else
      registration.handler = std::make_shared<orders::OrderProjection>(outbox, db.schema());
    worker =
        std::make_unique<boxcar::Worker>(db.pool(),
                                         boxcar::WorkerOptions{.schema = db.schema(),
                                                               .consumers = {orders::kProjection},
                                                               .batch_size = batch ? std::size_t{5} : std::size_t{1}},
                                         std::vector<boxcar::HandlerRegistration>{registration});
  }
};

}  // namespace

TEST_CASE("a global receipt to the orders projection becomes DEAD with HANDLER_PERMANENT and writes no row") {
  const bool batch = GENERATE(false, true);
  INFO((batch ? "batch handler" : "handler"));
  App app(batch);
  const auto global = order("evt-global", boxcar::Scope::global());
  const auto tenant = order("evt-7", boxcar::Scope::tenant("tenant-7"));
  REQUIRE(app.inbox.accept(global).kind == boxcar::Receipt::Kind::Accepted);
  REQUIRE(app.inbox.accept(tenant).kind == boxcar::Receipt::Kind::Accepted);

  boxcar::testing::drain(*app.worker);

  const auto refused = boxcar::testing::receipt_state(app.db, global);
  REQUIRE(refused);
  CHECK(refused->status == boxcar::ReceiptStatus::Dead);
  CHECK(refused->dead_reason == "HANDLER_PERMANENT");
  CHECK(refused->attempts == 1);
  CHECK(app.db.count("SELECT count(*) FROM {schema}.order_projection WHERE tenant_id = ''") == 0);
  CHECK(app.db.count("SELECT count(*) FROM {schema}.outbox_events WHERE tenant_scope = 'global'") == 0);
  // The tenant's order beside it is projected once, with its event.
  CHECK(boxcar::testing::receipt_state(app.db, tenant)->status == boxcar::ReceiptStatus::Completed);
  CHECK(app.db.count("SELECT count(*) FROM {schema}.order_projection WHERE tenant_id = 'tenant-7'") == 1);
  CHECK(app.db.count("SELECT count(*) FROM {schema}.order_projection") == 1);
  CHECK(app.db.count("SELECT count(*) FROM {schema}.outbox_events") == 1);
}
