// What can be emitted: an application-defined event type that declares its name, schema
// version, topic and payload, or a plain OutboxMessage for dynamic cases.
//
//   struct OrderProjected {
//     static constexpr std::string_view event_type = "order.projected";
//     static constexpr int schema_version = 1;
//     static constexpr std::string_view topic = "orders.projected";
//     std::string order_id;
//   };
//   void to_json(nlohmann::json& j, const OrderProjected& e) { j = {{"orderId", e.order_id}}; }
#pragma once

#include <concepts>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace boxcar {

/// An event type known at compile time; its payload comes from an ADL to_json.
template <typename E>
concept OutboxEvent = requires(const E& event, nlohmann::json& json) {
  { E::event_type } -> std::convertible_to<std::string_view>;
  { E::schema_version } -> std::convertible_to<int>;
  { E::topic } -> std::convertible_to<std::string_view>;
  to_json(json, event);
};

/// An event described at run time.
struct OutboxMessage {
  std::string event_type{};
  int schema_version = 1;
  std::string topic{};
  nlohmann::json payload{};
};

}  // namespace boxcar
