// The application event the tests emit: a compile-time OutboxEvent.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace boxcar::testing {

struct OrderProjected {
  static constexpr std::string_view event_type = "order.projected";
  static constexpr int schema_version = 1;
  static constexpr std::string_view topic = "orders.projected";
  std::string order_id;
};

inline void to_json(nlohmann::json& j, const OrderProjected& e) { j = {{"orderId", e.order_id}}; }

}  // namespace boxcar::testing
