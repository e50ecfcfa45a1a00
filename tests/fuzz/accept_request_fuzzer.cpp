// Accept-request decoding: a webhook body decoded as the example's endpoint does
// (webhook::decode_body, webhook::accept_request), then validated by the inbox exactly as
// accept() validates before touching the database (Inbox::validate). The input is
// "<webhook-id>\n<body>"; without a newline it is all body and the id is "msg_1".
// Properties: nothing crashes; a refusal is a BodyRejection with a code and a field, or an
// InboxValidationError with a code and a field (no other exception); an accepted request
// has a payload whose canonical form is a fixed point.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/inbox/errors.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "delivery.hpp"
#include "fuzz_check.hpp"

using boxcar::fuzz::check;

namespace {

constexpr const char* kConsumer = "orders.projection.v1";

// Validation never reaches the database, so the pool points nowhere and never connects.
const boxcar::Inbox& inbox() {
  static const auto pool = boxcar::ConnectionPool::create({.url = "postgresql://nobody@127.0.0.1:1/none"});
  static const boxcar::Inbox instance(pool, {.consumers = {kConsumer}, .notify = false});
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view id = "msg_1";
  std::string_view body = input;
  if (const auto newline = input.find('\n'); newline != std::string_view::npos) {
    id = input.substr(0, newline);
    body = input.substr(newline + 1);
  }

  auto decoded = webhook::decode_body(body, 1024 * 1024);
  if (const auto* refused = std::get_if<webhook::BodyRejection>(&decoded)) {
    check(!refused->code.empty() && !refused->field.empty(), "a body rejection names a code and a field", input);
    return 0;
  }
  const boxcar::AcceptRequest request = webhook::accept_request(std::get<webhook::Delivery>(std::move(decoded)),
                                                                "tenant-a", id, "webhook:orders", kConsumer);
  try {
    inbox().validate(request);
  } catch (const boxcar::InboxValidationError& e) {
    check(!e.code().empty() && !e.field().empty(), "a validation error names a code and a field", input);
    return 0;
  }
  const std::string canonical = boxcar::canonicalize(request.payload);
  check(boxcar::canonicalize_text(canonical) == canonical, "an accepted payload's canonical form is a fixed point",
        input);
  check(boxcar::content_fingerprint(request.event_type, request.schema_version, canonical).size() == 64,
        "an accepted request has a SHA-256 fingerprint", input);
  return 0;
}
