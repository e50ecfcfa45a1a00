// The webhook signature verifier and its parsers (examples/webhook/signature.hpp). The
// input is lines: secrets spec, webhook-id, webhook-timestamp, webhook-signature, then
// the body (the rest, newlines included); missing lines are empty.
// Properties: nothing crashes or throws (parse_secrets only std::invalid_argument);
// parse_secrets yields tenants and non-empty secrets; base64 decode/encode round-trips;
// a Verified result names a configured tenant whose key signed exactly this content;
// and the content signed with a configured key at "now" verifies.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.hpp"
#include "signature.hpp"

using boxcar::fuzz::check;

namespace {

constexpr std::int64_t kNow = 1'700'000'000;

std::string_view next_line(std::string_view& rest) {
  const auto newline = rest.find('\n');
  const std::string_view line = rest.substr(0, newline);
  rest = newline == std::string_view::npos ? std::string_view{} : rest.substr(newline + 1);
  return line;
}

// The one call into verify(): if its parameters change (key selection by key id), only
// this function changes.
webhook::VerifyResult call_verify(const std::vector<webhook::SigningKey>& keys, std::string_view id,
                                  std::string_view timestamp, std::string_view signature, std::string_view body) {
  return webhook::verify(keys, {.id = id, .timestamp = timestamp, .signature = signature, .body = body},
                         std::chrono::system_clock::time_point(std::chrono::seconds(kNow)));
}

std::vector<webhook::SigningKey> default_keys() {
  return webhook::parse_secrets("tenant-a=whsec_c2VjcmV0LWEtMDAwMDAwMDAwMDAwMDAwMA==,tenant-b=whsec_c2VjcmV0LWI=");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view rest = input;
  const std::string_view spec = next_line(rest);
  const std::string_view id = next_line(rest);
  const std::string_view timestamp = next_line(rest);
  const std::string_view signature = next_line(rest);
  const std::string_view body = rest;

  std::vector<std::uint8_t> decoded;
  if (webhook::base64_decode(spec, decoded)) {
    std::vector<std::uint8_t> again;
    check(webhook::base64_decode(webhook::base64_encode(decoded), again) && again == decoded,
          "base64 decode of encode gives the same bytes", input);
  }

  std::vector<webhook::SigningKey> keys;
  try {
    keys = webhook::parse_secrets(spec);
    check(!keys.empty(), "parse_secrets returns at least one key", input);
    for (const auto& key : keys)
      check(!key.tenant.empty() && !key.secret.empty(), "every parsed key has a tenant and a secret", input);
  } catch (const std::invalid_argument&) {
    keys = default_keys();
  }

  const webhook::VerifyResult result = call_verify(keys, id, timestamp, signature, body);
  if (result.verified()) {
    const bool signed_by_that_tenant = std::any_of(keys.begin(), keys.end(), [&](const webhook::SigningKey& key) {
      return key.tenant == result.tenant &&
             signature.find(webhook::sign(key.secret, id, timestamp, body).substr(3)) != std::string_view::npos;
    });
    check(signed_by_that_tenant, "Verified names a tenant whose key signed this content", input);
  } else {
    check(result.tenant.empty(), "a refusal names no tenant", input);
  }

  if (!id.empty()) {
    const std::string now = std::to_string(kNow);
    const webhook::VerifyResult good =
        call_verify(keys, id, now, webhook::sign(keys.front().secret, id, now, body), body);
    check(good.verified() && good.tenant == keys.front().tenant, "content signed with a configured key verifies",
          input);
  }
  return 0;
}
