// The body half of the webhook endpoint: strict parsing and the envelope's fields.
#include "delivery.hpp"

#include <cstdint>
#include <limits>

#include "boxcar/core/canonical_json.hpp"

namespace webhook {

std::variant<Delivery, BodyRejection> decode_body(std::string_view body, std::size_t max_body_bytes) {
  using Json = nlohmann::json;
  Json event;
  try {
    event = Json::parse(boxcar::canonicalize_text(
        body, {.max_depth = boxcar::CanonicalLimits{}.max_depth + 1, .max_bytes = 2 * max_body_bytes}));
  } catch (const boxcar::JsonValueError& e) {
    return BodyRejection{e.code(), e.what(), "body" + e.path()};
  }
  if (!event.is_object()) return BodyRejection{"INVALID_BODY", "the body must be a JSON object", "body"};
  const auto type = event.find("type");
  if (type == event.end()) return BodyRejection{"INBOX_FIELD_REQUIRED", "'type' is required", "type"};
  if (!type->is_string()) return BodyRejection{"INBOX_FIELD_INVALID", "'type' must be a string", "type"};
  Delivery delivery{.type = type->get<std::string>()};
  if (const auto v = event.find("version"); v != event.end()) {
    if (!v->is_number_integer() || v->get<std::int64_t>() < std::numeric_limits<int>::min() ||
        v->get<std::int64_t>() > std::numeric_limits<int>::max())
      return BodyRejection{"INBOX_SCHEMA_VERSION_INVALID", "'version' must be an integer", "version"};
    delivery.version = static_cast<int>(v->get<std::int64_t>());
  }
  const auto data = event.find("data");
  if (data == event.end()) return BodyRejection{"INBOX_FIELD_REQUIRED", "'data' is required", "data"};
  delivery.data = std::move(*data);
  return delivery;
}

boxcar::AcceptRequest accept_request(Delivery delivery, const std::string& tenant, std::string_view webhook_id,
                                     const std::string& source, const std::string& consumer) {
  return {
      .scope = boxcar::Scope::tenant(tenant),  // from the verifying key, never from the body
      .source = source,
      .consumer = consumer,
      .message_id = std::string(webhook_id),
      .event_type = std::move(delivery.type),
      .schema_version = delivery.version,
      .payload = std::move(delivery.data),
  };
}

}  // namespace webhook
