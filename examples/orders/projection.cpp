// The handlers of orders.projection.v1 (projection.hpp).
#include "projection.hpp"

#include <vector>

#include "boxcar/core/pg_array.hpp"
#include "boxcar/core/sql_identifier.hpp"

namespace orders {
namespace {

constexpr const char* kTenantOnly = "orders are tenant data: a global receipt has no tenant to project for";

}  // namespace

void to_json(nlohmann::json& j, const OrderProjected& e) { j = {{"orderId", e.order_id}, {"total", e.total}}; }

std::string projection_table_ddl(const std::string& schema) {
  return "CREATE TABLE IF NOT EXISTS " + boxcar::quote_identifier(schema) +
         ".order_projection (tenant_id text NOT NULL, order_id text NOT NULL, total numeric NOT NULL, "
         "UNIQUE (tenant_id, order_id))";
}

OrderProjection::OrderProjection(boxcar::OutboxEmitter& outbox, const std::string& schema)
    : outbox_(outbox), table_(boxcar::quote_identifier(schema) + ".order_projection") {}

void OrderProjection::handle(const nlohmann::json& payload, boxcar::HandlerContext& context) {
  // The scope guard: never write a tenant's row without a tenant.
  if (context.scope.kind != boxcar::Scope::Kind::Tenant) throw boxcar::InboxPermanentError(kTenantOnly);
  const std::string order_id = payload.at("orderId");
  const double total = payload.at("total");
  context.tx.exec("INSERT INTO " + table_ + " (tenant_id, order_id, total) VALUES ($1, $2, $3)", context.scope.id,
                  order_id, total);
  outbox_.emit(context.tx, OrderProjected{order_id, total},
               {.scope = context.scope, .causation_id = context.message_id});
}

OrderProjectionBatch::OrderProjectionBatch(boxcar::OutboxEmitter& outbox, const std::string& schema)
    : outbox_(outbox), table_(boxcar::quote_identifier(schema) + ".order_projection") {}

boxcar::BatchOutcomes OrderProjectionBatch::handle_batch(std::span<const boxcar::InboxMessage> messages,
                                                         boxcar::BatchContext& context) {
  boxcar::BatchOutcomes outcomes;
  std::vector<std::size_t> projected;
  std::vector<std::string> tenants, order_ids, totals;
  for (std::size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.scope.kind != boxcar::Scope::Kind::Tenant) {
      outcomes.push_back(boxcar::MessageOutcome::permanent(kTenantOnly));
      continue;
    }
    outcomes.push_back(boxcar::MessageOutcome::completed());
    projected.push_back(i);
    tenants.push_back(m.scope.id);
    order_ids.push_back(m.payload.at("orderId").get<std::string>());
    totals.push_back(m.payload.at("total").dump());
  }
  // A permanent outcome rolls the batch back and re-runs the others without it: write
  // nothing for them now.
  if (projected.size() < messages.size()) return outcomes;
  context.tx.exec("INSERT INTO " + table_ +
                      " (tenant_id, order_id, total) "
                      "SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]), "
                      "pg_catalog.unnest($3::numeric[])) "
                      "ON CONFLICT DO NOTHING",
                  boxcar::pg_array(tenants), boxcar::pg_array(order_ids), boxcar::pg_array(totals));
  for (std::size_t n = 0; n < projected.size(); ++n) {
    const auto& m = messages[projected[n]];
    outbox_.emit(context.tx, OrderProjected{order_ids[n], m.payload.at("total").get<double>()},
                 {.scope = m.scope, .causation_id = m.message_id});
  }
  return outcomes;
}

}  // namespace orders
