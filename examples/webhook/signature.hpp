// Standard Webhooks (https://www.standardwebhooks.com) signature verification, kept apart
// from HTTP and the inbox so it can be unit-tested on its own.
//
// A sender signs `{webhook-id}.{webhook-timestamp}.{raw body bytes}` with HMAC-SHA256 and
// sends `webhook-signature: v1,<base64> [v1,<base64> ...]`. verify() checks the raw bytes
// before anything parses them, refuses timestamps outside a tolerance (replay window),
// compares MACs in constant time, and tries every candidate key so a sender can rotate
// secrets. The key that verified names the tenant: the tenant never comes from the body.
//
// Cost bound: Standard Webhooks has no key id, so a server that tried every configured key
// would spend one HMAC over the whole body per key on every unauthenticated request. The
// caller therefore selects the candidates first by a key id that travels outside the signed
// content (this example: the tenant in the URL, `/webhooks/orders/<tenant>`, see
// KeyRing::keys_for), and verify() tries only those: one tenant's active secrets (1-2 during a
// rotation). An unknown key id gives no candidates and costs no HMAC at all.
//
// Thread-safety: every function is pure and may be called concurrently.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
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

/// A tenant is also the key id a sender puts in the URL: 1-64 characters of `A-Z a-z 0-9 . _ -`
/// (URL-safe without escaping, and never `.` or `..`).
bool valid_key_id(std::string_view key_id) noexcept;

/// Parses `tenant=whsec_<base64>[,tenant=whsec_<base64>...]` (the WEBHOOK_SECRETS format).
/// A tenant may appear several times (rotation: every listed secret is active). Blanks
/// around entries are ignored.
/// @throws std::invalid_argument for an empty list, an entry without `=`, a tenant that is
///   not a valid_key_id, a secret without the `whsec_` prefix, bad base64, an empty secret,
///   or one secret configured for two tenants (the verifying key must name exactly one tenant).
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
  /// HMAC-SHA256 computations spent on this input: the number of candidate keys tried
  /// (0 when the headers or the timestamp were refused first, or there were no candidates).
  std::size_t keys_tried = 0;

  bool verified() const noexcept { return status == VerifyStatus::Verified; }
};

struct VerifyInput {
  std::string_view id;         // webhook-id header
  std::string_view timestamp;  // webhook-timestamp header (Unix seconds)
  std::string_view signature;  // webhook-signature header
  std::string_view body;       // the raw request body, exactly as received
};

inline constexpr std::chrono::seconds kDefaultTolerance{5 * 60};

/// The checks that need no body and no key: the three headers are present and the timestamp
/// is an integer within `tolerance` of `now`. Returns the failure, or nothing when they pass.
/// A server runs this before it reads the body; verify() runs it again. `input.body` is unused.
std::optional<VerifyStatus> check_headers(const VerifyInput& input,
                                          std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
                                          std::chrono::seconds tolerance = kDefaultTolerance) noexcept;

/// Verifies a delivery against the candidate `keys`, and only those: pass the keys selected
/// by the key id (KeyRing::keys_for), not every configured key. It computes one HMAC per
/// candidate key (VerifyResult::keys_tried) and none when check_headers fails or no `v1,`
/// signature in the header is well formed. Pure: no I/O, no global state.
/// Never throws for hostile input; std::bad_alloc or an OpenSSL failure (no usable
/// SHA-256 provider: std::runtime_error) are the only exceptions.
VerifyResult verify(std::span<const SigningKey> keys, const VerifyInput& input,
                    std::chrono::system_clock::time_point now = std::chrono::system_clock::now(),
                    std::chrono::seconds tolerance = kDefaultTolerance);

/// The configured keys grouped by tenant, so a request's key id selects its candidates
/// without touching any other tenant's secrets. Immutable after construction; thread-safe.
class KeyRing {
 public:
  /// @throws std::invalid_argument when `keys` is empty or a tenant is not a valid_key_id.
  explicit KeyRing(std::vector<SigningKey> keys);

  /// The active secrets of tenant `key_id` (in configuration order); empty when unknown.
  std::span<const SigningKey> keys_for(std::string_view key_id) const;

  std::size_t tenant_count() const noexcept { return by_tenant_.size(); }

 private:
  std::map<std::string, std::vector<SigningKey>, std::less<>> by_tenant_;
};

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
