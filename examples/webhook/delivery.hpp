// Decoding a verified delivery's body into the AcceptRequest the endpoint records: strict
// JSON (boxcar::canonicalize_text), then the Standard Webhooks envelope {type, version?,
// data}. Pure, without HTTP, so the server and the fuzzer (tests/fuzz) run the same code.
//
// Thread-safety: every function is pure and may be called concurrently.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/accept_request.hpp"

namespace webhook {

/// The envelope of a delivery: what the body says (never who sent it).
struct Delivery {
  std::string type{};
  int version = 1;
  nlohmann::json data{};
};

/// Why a body was refused (HTTP 400): a stable code, a message, and the field as the
/// sender wrote it ("body/...", "type", "version", "data").
struct BodyRejection {
  std::string code{};
  std::string message{};
  std::string field{};
};

/// Parses `body` strictly: duplicate member names, non-finite or unsafe numbers, bad
/// UTF-8 and hostile depth are refused (boxcar::canonicalize_text) instead of being
/// silently resolved by a lenient parser; the canonical text then parses safely.
/// `max_body_bytes` bounds the canonical form (twice the body: escapes may grow it).
/// Never throws for hostile input (std::bad_alloc aside).
std::variant<Delivery, BodyRejection> decode_body(std::string_view body, std::size_t max_body_bytes);

/// The request the endpoint records for a verified delivery: the tenant comes from the
/// verifying key, never from the body; the identity is source + consumer + webhook-id.
boxcar::AcceptRequest accept_request(Delivery delivery, const std::string& tenant, std::string_view webhook_id,
                                     const std::string& source, const std::string& consumer);

}  // namespace webhook
