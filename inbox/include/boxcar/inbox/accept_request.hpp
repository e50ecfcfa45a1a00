// The request accept() takes; fields in the order a designated initialiser names them:
//
//   inbox.accept({.scope = Scope::tenant(verified_id), .source = "orders-service",
//                 .consumer = "orders.projection.v1", .message_id = event_id,
//                 .event_type = "order.created", .schema_version = 1, .payload = body});
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "boxcar/core/scope.hpp"

namespace boxcar {

/// Tracing and correlation data carried with a message. Not fingerprinted: a
/// redelivery with other trace headers is still a duplicate.
struct Metadata {
  std::string traceparent{};
  std::string tracestate{};
  std::string correlation_id{};
  std::string causation_id{};
  std::map<std::string, std::string> headers{};

  friend bool operator==(const Metadata&, const Metadata&) = default;
};

struct AcceptRequest {
  /// Identity: scope + source + consumer + message_id. Stable across redeliveries.
  Scope scope{};
  std::string source{};
  std::string consumer{};
  std::string message_id{};
  /// Content: fingerprinted together with the payload.
  std::string event_type{};
  int schema_version = 0;
  nlohmann::json payload{};
  Metadata metadata{};
};

}  // namespace boxcar
