// The pipeline the console's tests look at: a Runtime running the worker and the console on
// a fresh schema, with a poison message group (three orders whose handler fails and that go
// DEAD at their first attempt), five good orders, and an ordered consumer whose key "k1"
// of tenant acme is blocked by a DEAD head with two receipts waiting behind it. The poison
// stops failing once `poison` is false, so a retry then completes them.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "boxcar/runtime/runtime.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/lambda_handler.hpp"
#include "test_database.hpp"

namespace boxcar::testing {

class ConsolePipeline {
 public:
  static constexpr const char* kOrders = "orders.v1";
  static constexpr const char* kShipments = "shipments.v1";
  static constexpr const char* kAdminToken = "console-admin-token-for-tests-0123456789";
  static constexpr int kPoisoned = 3;
  static constexpr int kGood = 5;

  /// `tune` adjusts the configuration before the runtime starts (e.g. no admin token).
  explicit ConsolePipeline(const std::function<void(RuntimeConfig&)>& tune = {}) {
    RuntimeConfig config;
    config.pool.url = db.url();
    config.pool.size = 6;
    config.schema = db.schema();
    config.consumers = {kOrders, kShipments};
    config.inbox_ordering.insert_or_assign(
        kShipments, OrderingRule{.key = OrderingKey::payload_pointer("/key"), .head_of_line = HeadOfLine::block()});
    config.worker.concurrency = 2;
    config.worker.max_attempts = 1;
    config.worker.poll_interval = std::chrono::milliseconds(200);
    config.http.listen = "";
    config.backlog.interval = std::chrono::milliseconds(200);
    config.console.enabled = true;
    config.console.port = 0;
    config.console.admin_token = kAdminToken;
    config.console.refresh = std::chrono::milliseconds(500);
    if (tune) tune(config);
    runtime = std::make_unique<Runtime>(std::move(config));
    // Two failures, so two DEAD groups: the orders' and the blocked key's head.
    const auto fail_order = [this](const nlohmann::json& payload, HandlerContext&) {
      if (payload.value("poison", false) && poison.load())
        throw std::runtime_error("card declined for order " + std::to_string(payload.value("order", 0)));
    };
    const auto fail_shipment = [this](const nlohmann::json& payload, HandlerContext&) {
      if (payload.value("poison", false) && poison.load()) throw std::runtime_error("carrier refused the parcel");
    };
    runtime->start(Role::Worker,
                   {{.consumer = kOrders, .supports = {{"order.placed", 1}}, .handler = handler(fail_order)},
                    {.consumer = kShipments, .supports = {{"shipment.booked", 1}}, .handler = handler(fail_shipment)}});
    auto& inbox = runtime->inbox();
    for (int i = 1; i <= kGood + kPoisoned; ++i) {
      const bool poisoned = i > kGood;
      nlohmann::json payload = {{"order", 1000 + i}};
      if (poisoned) payload.update({{"poison", true}, {"card", {{"number", "4111"}, {"password", "hunter2"}}}});
      inbox.accept({.scope = Scope::tenant("t1"),
                    .source = "shop",
                    .consumer = kOrders,
                    .message_id = (poisoned ? "poison-" : "order-") + std::to_string(i),
                    .event_type = "order.placed",
                    .schema_version = 1,
                    .payload = payload});
    }
    // k1's head is poisoned: the key blocks, two wait behind it. k2 runs through.
    const auto ship = [&](const std::string& id, const std::string& key, bool poisoned) {
      nlohmann::json payload = {{"key", key}, {"order", 2000}};
      if (poisoned) payload["poison"] = true;
      inbox.accept({.scope = Scope::tenant("acme"),
                    .source = "warehouse",
                    .consumer = kShipments,
                    .message_id = id,
                    .event_type = "shipment.booked",
                    .schema_version = 1,
                    .payload = payload});
    };
    ship("ship-k1-0", "k1", true);
    ship("ship-k1-1", "k1", false);
    ship("ship-k1-2", "k1", false);
    ship("ship-k2-0", "k2", false);
    if (!eventually([&] { return settled(); }, std::chrono::seconds(60)))
      throw std::runtime_error("the console pipeline did not settle");
  }

  ~ConsolePipeline() {
    if (runtime) runtime->stop();
  }

  int port() const { return runtime->console_port(); }

  std::int64_t count(const std::string& where) const {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE " + where);
  }

  TestDatabase db;
  std::atomic<bool> poison{true};
  std::unique_ptr<Runtime> runtime;

 private:
  bool settled() const {
    return count("consumer = 'orders.v1' AND status = 'DEAD'") == kPoisoned &&
           count("consumer = 'orders.v1' AND status = 'COMPLETED'") == kGood &&
           count("consumer = 'shipments.v1' AND status = 'DEAD'") == 1 &&
           count("consumer = 'shipments.v1' AND status = 'WAITING'") == 2 &&
           count("consumer = 'shipments.v1' AND status = 'COMPLETED'") == 1;
  }
};

}  // namespace boxcar::testing
