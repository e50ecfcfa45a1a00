// The worker side of examples/orders: the application's handlers of orders.projection.v1,
// each writing one business row and one order.projected event in context.tx. Shared by
// orders_demo and the example's tests.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/batch_handler.hpp"
#include "boxcar/inbox/handler.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "ingress.hpp"

namespace orders {

struct OrderProjected {
  static constexpr std::string_view event_type = "order.projected";
  static constexpr int schema_version = 1;
  static constexpr std::string_view topic = kProjectedTopic;
  std::string order_id;
  double total;
};
void to_json(nlohmann::json& j, const OrderProjected& e);

/// The projection table's DDL in `schema`: (tenant_id, order_id) is unique, and a row
/// always names its tenant.
std::string projection_table_ddl(const std::string& schema);

/// One order per message: its row in <schema>.order_projection and its event. Orders are
/// tenant data: a global receipt is refused with InboxPermanentError (DEAD at once,
/// HANDLER_PERMANENT) and writes nothing, where it would otherwise write a row with an
/// empty tenant id.
class OrderProjection final : public boxcar::InboxHandler {
 public:
  OrderProjection(boxcar::OutboxEmitter& outbox, const std::string& schema);
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override;

 private:
  boxcar::OutboxEmitter& outbox_;
  std::string table_;
};

/// The batch variant (ORDERS_BATCH_HANDLER=1, docs/worker.md "Batch handlers"): the
/// batch's rows in one unnest insert, keyed by (tenant_id, order_id) with ON CONFLICT so a
/// re-run writes nothing twice, and one event per completed message, all in context.tx. A
/// global receipt's outcome is permanent, as in OrderProjection.
class OrderProjectionBatch final : public boxcar::InboxBatchHandler {
 public:
  OrderProjectionBatch(boxcar::OutboxEmitter& outbox, const std::string& schema);
  boxcar::BatchOutcomes handle_batch(std::span<const boxcar::InboxMessage> messages,
                                     boxcar::BatchContext& context) override;

 private:
  boxcar::OutboxEmitter& outbox_;
  std::string table_;
};

}  // namespace orders
