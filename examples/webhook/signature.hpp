// Standard Webhooks (https://www.standardwebhooks.com) signature verification, kept apart
// from HTTP and the inbox so it can be unit-tested on its own.
//
// A sender signs `{webhook-id}.{webhook-timestamp}.{raw body bytes}` with HMAC-SHA256 and
// sends `webhook-signature: v1,<base64> [v1,<base64> ...]`. verify() checks the raw bytes
// before anything parses them, refuses timestamps outside a tolerance (replay window),
// compares MACs in constant time, and tries every configured key so a sender can rotate
// secrets. The key that verified names the tenant: the tenant never comes from the body.
//
// Thread-safety: every function is pure and may be called concurrently.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace webhook {

/// One active signing secret and the tenant it authenticates.
struct SigningKey {
  std::string tenant;
  /// The decoded secret (the bytes after `whsec_`, base64-decoded).
  std::vector<std::uint8_t> secret;
};

/// Parses `tenant=whsec_<base64>[,tenant=whsec_<base64>...]` (the WEBHOOK_SECRETS format).
/// A tenant may appear several times (rotation: every listed secret is active). Blanks
/// around entries are ignored.
/// @throws std::invalid_argument for an empty list, an entry without `=`, an empty tenant,
///   a secret without the `whsec_` prefix, bad base64, an empty secret, or one secret
///   configured for two tenants (the verifying key must name exactly one tenant).
std::vector<SigningKey> parse_secrets(std::string_view spec);

/// Decodes one `whsec_<base64>` secret. @throws std::invalid_argument as parse_secrets.
std::vector<std::uint8_t> decode_secret(std::string_view whsec);

enum class VerifyStatus {
  /// A signature matched; VerifyResult::tenant is the key's tenant.
  Verified,
  /// webhook-id, webhook-timestamp or webhook-signature is missing or empty.
  MissingHeader,
  /// webhook-timestamp is not an integer number of seconds.
  InvalidTimestamp,
  /// webhook-timestamp is further from now than the tolerance (either direction).
  StaleTimestamp,
  /// No `v1,` signature in the header matched any configured key.
  NoMatchingSignature,
};

/// "verified", "missing_header", "invalid_timestamp", "stale_timestamp", "no_matching_signature".
const char* to_string(VerifyStatus status) noexcept;

struct VerifyResult {
  VerifyStatus status = VerifyStatus::NoMatchingSignature;
  /// The tenant of the key that verified; empty unless Verified.
  std::string tenant{};

  bool verified() const noexcept { return status == VerifyStatus::Verified; }
};

struct VerifyInput {
  std::string_view id;         // webhook-id header
  std::string_view timestamp;  // webhook-timestamp header (Unix seconds)
  std::string_view signature;  // webhook-signature header
  std::string_view body;       // the raw request body, exactly as received
};

inline constexpr std::chrono::seconds kDefaultTolerance{5 * 60};

/// Verifies a delivery against every key in `keys`.
/// Never throws for hostile input; std::bad_alloc or an OpenSSL failure (no usable
/// SHA-256 provider: std::runtime_error) are the only exceptions.
VerifyResult verify(std::span<const SigningKey> keys, const VerifyInput& input,
                    std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
                    std::chrono::seconds tolerance = kDefaultTolerance);

/// `v1,<base64 HMAC-SHA256(secret, "{id}.{timestamp}.{body}")>`: what a sender puts in
/// webhook-signature (several separated by spaces while it rotates). For tests and tools.
std::string sign(std::span<const std::uint8_t> secret, std::string_view id, std::string_view timestamp,
                 std::string_view body);

/// Equal length and equal bytes, in time that depends only on the length (CRYPTO_memcmp).
bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept;

/// Standard base64 (RFC 4648 §4). decode accepts missing padding and returns false on any
/// other malformation.
std::string base64_encode(std::span<const std::uint8_t> bytes);
bool base64_decode(std::string_view text, std::vector<std::uint8_t>& out);

}  // namespace webhook
