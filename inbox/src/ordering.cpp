// Ordering rules: their construction checks, and a message's key under a rule.
#include "ordering_key.hpp"

#include <cmath>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/inbox/errors.hpp"
#include "prepared_request.hpp"

namespace boxcar {

OrderingKey OrderingKey::metadata_header(std::string name) {
  if (name.empty()) throw ConfigError("inbox.ordering.", "a metadata header name must not be empty");
  return OrderingKey(false, std::move(name));
}

OrderingKey OrderingKey::payload_pointer(std::string pointer) {
  try {
    [[maybe_unused]] const nlohmann::json::json_pointer parsed(pointer);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError("inbox.ordering.", "'" + pointer + "' is not a JSON Pointer (RFC 6901): " + e.what());
  }
  if (pointer.empty()) throw ConfigError("inbox.ordering.", "the payload pointer must name a member, e.g. /order/id");
  return OrderingKey(true, std::move(pointer));
}

std::string OrderingKey::field() const { return from_payload_ ? "payload" + path_ : "metadata.headers/" + path_; }

HeadOfLine HeadOfLine::park_after(int attempts) {
  if (attempts < 1)
    throw ConfigError("inbox.ordering.", "park_after needs at least 1 attempt, got " + std::to_string(attempts));
  return HeadOfLine(attempts);
}

namespace detail {
namespace {

bool is_integral_safe_double(const nlohmann::json& value) {
  if (!value.is_number_float()) return false;
  const double number = value.get<double>();
  return std::isfinite(number) && std::trunc(number) == number &&
         std::fabs(number) <= static_cast<double>(kMaxSafeInteger);
}

}  // namespace

std::string ordering_key_of(const OrderingRule& rule, const AcceptRequest& request) {
  const OrderingKey& source = rule.key;
  std::string key;
  if (source.from_payload()) {
    const nlohmann::json::json_pointer pointer(source.path());
    if (!request.payload.contains(pointer))
      throw InboxValidationError("INBOX_ORDERING_KEY_MISSING", source.field(),
                                 "the consumer orders by this value, and the payload has none");
    const nlohmann::json& value = request.payload.at(pointer);
    if (value.is_string())
      key = value.get<std::string>();
    else if (value.is_number_integer())
      key = value.dump();
    else if (is_integral_safe_double(value))
      // The number rule looks at values, not at their C++ type or spelling: 5.0 is the
      // integer 5, as it is to a client in JavaScript, which has no other (docs/ordering.md).
      key = format_es_number(value.get<double>());
    else
      throw InboxValidationError("INBOX_ORDERING_KEY_INVALID", source.field(),
                                 std::string("an ordering key is a string or an integer, not ") + value.type_name());
  } else {
    const auto found = request.metadata.headers.find(source.path());
    if (found == request.metadata.headers.end())
      throw InboxValidationError("INBOX_ORDERING_KEY_MISSING", source.field(),
                                 "the consumer orders by this header, and the message has none");
    key = found->second;
  }
  check_text_field(key, source.field().c_str(), true);
  return key;
}

}  // namespace detail
}  // namespace boxcar
