// Standard Webhooks verification on OpenSSL's one-shot HMAC() and CRYPTO_memcmp.
#include "signature.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <stdexcept>

namespace webhook {

namespace {

constexpr std::string_view kSecretPrefix = "whsec_";
constexpr std::string_view kSignatureVersion = "v1,";
constexpr std::size_t kMacSize = 32;  // SHA-256
using Mac = std::array<std::uint8_t, kMacSize>;

constexpr std::string_view kBase64Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_value(char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

Mac hmac_sha256(std::span<const std::uint8_t> secret, std::string_view id, std::string_view timestamp,
                std::string_view body) {
  // The signed content is exactly `{id}.{timestamp}.{body}`; the body is the raw bytes
  // received, never a re-serialisation of parsed JSON.
  std::string content;
  content.reserve(id.size() + timestamp.size() + body.size() + 2);
  content.append(id).append(".").append(timestamp).append(".").append(body);
  Mac mac{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
            reinterpret_cast<const unsigned char*>(content.data()), content.size(), mac.data(), &length) ||
      length != kMacSize)
    throw std::runtime_error("webhook: HMAC-SHA256 failed in OpenSSL");
  return mac;
}

}  // namespace

std::string base64_encode(std::span<const std::uint8_t> bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t n = (std::uint32_t{bytes[i]} << 16) | (std::uint32_t{bytes[i + 1]} << 8) | bytes[i + 2];
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += kBase64Alphabet[(n >> 6) & 63];
    out += kBase64Alphabet[n & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    std::uint32_t n = std::uint32_t{bytes[i]} << 16;
    if (rest == 2) n |= std::uint32_t{bytes[i + 1]} << 8;
    out += kBase64Alphabet[(n >> 18) & 63];
    out += kBase64Alphabet[(n >> 12) & 63];
    out += rest == 2 ? kBase64Alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

bool base64_decode(std::string_view text, std::vector<std::uint8_t>& out) {
  out.clear();
  std::size_t padding = 0;
  while (!text.empty() && text.back() == '=' && padding < 2) {
    text.remove_suffix(1);
    ++padding;
  }
  // Padded input must be a whole number of quads; one leftover character is never valid.
  if (padding > 0 && (text.size() + padding) % 4 != 0) return false;
  if (text.size() % 4 == 1) return false;
  out.reserve(text.size() * 3 / 4);
  std::uint32_t buffer = 0;
  int bits = 0;
  for (const char c : text) {
    const int value = base64_value(c);
    if (value < 0) return false;
    buffer = (buffer << 6) | static_cast<std::uint32_t>(value);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<std::uint8_t>((buffer >> bits) & 0xff));
    }
  }
  // Leftover bits must be zero, so every byte string has exactly one encoding.
  return (buffer & ((1u << bits) - 1)) == 0;
}

std::vector<std::uint8_t> decode_secret(std::string_view whsec) {
  whsec = trim(whsec);
  if (!whsec.starts_with(kSecretPrefix)) throw std::invalid_argument("a secret must start with 'whsec_'");
  std::vector<std::uint8_t> secret;
  if (!base64_decode(whsec.substr(kSecretPrefix.size()), secret))
    throw std::invalid_argument("a secret must be 'whsec_' followed by base64");
  if (secret.empty()) throw std::invalid_argument("a secret must not be empty");
  return secret;
}

std::vector<SigningKey> parse_secrets(std::string_view spec) {
  std::vector<SigningKey> keys;
  while (!spec.empty()) {
    const std::size_t comma = spec.find(',');
    const std::string_view entry = trim(spec.substr(0, comma));
    spec = comma == std::string_view::npos ? std::string_view{} : spec.substr(comma + 1);
    if (entry.empty()) continue;
    const std::size_t equals = entry.find('=');
    if (equals == std::string_view::npos)
      throw std::invalid_argument("expected tenant=whsec_<base64>, got an entry without '='");
    const std::string_view tenant = trim(entry.substr(0, equals));
    if (tenant.empty()) throw std::invalid_argument("an entry has an empty tenant");
    // Never quote the entry: it holds a secret. The tenant is the key id in the URL.
    if (!valid_key_id(tenant))
      throw std::invalid_argument("a tenant must be 1-64 characters of A-Z a-z 0-9 . _ - (it is the URL's key id)");
    keys.push_back({.tenant = std::string(tenant), .secret = decode_secret(entry.substr(equals + 1))});
  }
  if (keys.empty()) throw std::invalid_argument("no secrets configured");
  // If one secret belonged to two tenants, the verifying key would not name one tenant.
  for (std::size_t i = 0; i < keys.size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if (keys[i].secret == keys[j].secret && keys[i].tenant != keys[j].tenant)
        throw std::invalid_argument("one secret is configured for tenants '" + keys[j].tenant + "' and '" +
                                    keys[i].tenant + "'");
  return keys;
}

bool valid_key_id(std::string_view key_id) noexcept {
  if (key_id.empty() || key_id.size() > 64 || key_id == "." || key_id == "..") return false;
  return std::all_of(key_id.begin(), key_id.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == '-';
  });
}

KeyRing::KeyRing(std::vector<SigningKey> keys) {
  if (keys.empty()) throw std::invalid_argument("no signing keys configured");
  for (SigningKey& key : keys) {
    if (!valid_key_id(key.tenant))
      throw std::invalid_argument("a tenant must be 1-64 characters of A-Z a-z 0-9 . _ - (it is the URL's key id)");
    std::vector<SigningKey>& tenant_keys = by_tenant_[key.tenant];
    tenant_keys.push_back(std::move(key));
  }
}

std::span<const SigningKey> KeyRing::keys_for(std::string_view key_id) const {
  const auto found = by_tenant_.find(key_id);
  if (found == by_tenant_.end()) return {};
  return found->second;
}

const char* to_string(VerifyStatus status) noexcept {
  switch (status) {
    case VerifyStatus::Verified:
      return "verified";
    case VerifyStatus::MissingHeader:
      return "missing_header";
    case VerifyStatus::InvalidTimestamp:
      return "invalid_timestamp";
    case VerifyStatus::StaleTimestamp:
      return "stale_timestamp";
    case VerifyStatus::NoMatchingSignature:
      return "no_matching_signature";
  }
  return "unknown";
}

bool constant_time_equal(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) noexcept {
  // The length of a MAC is public; only the bytes must not leak through timing.
  if (a.size() != b.size()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string sign(std::span<const std::uint8_t> secret, std::string_view id, std::string_view timestamp,
                 std::string_view body) {
  const Mac mac = hmac_sha256(secret, id, timestamp, body);
  return std::string(kSignatureVersion) + base64_encode(mac);
}

std::optional<VerifyStatus> check_headers(const VerifyInput& input, std::chrono::system_clock::time_point now,
                                          std::chrono::seconds tolerance) noexcept {
  if (input.id.empty() || input.timestamp.empty() || input.signature.empty()) return VerifyStatus::MissingHeader;

  std::int64_t timestamp = 0;
  const char* end = input.timestamp.data() + input.timestamp.size();
  const auto parsed = std::from_chars(input.timestamp.data(), end, timestamp);
  if (parsed.ec != std::errc{} || parsed.ptr != end || input.timestamp.front() == '-')
    return VerifyStatus::InvalidTimestamp;
  // Reject before any HMAC work: a stale delivery is a replay or a clock problem.
  const std::int64_t now_seconds = std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (timestamp < now_seconds - tolerance.count() || timestamp > now_seconds + tolerance.count())
    return VerifyStatus::StaleTimestamp;
  return std::nullopt;
}

VerifyResult verify(std::span<const SigningKey> keys, const VerifyInput& input,
                    std::chrono::system_clock::time_point now, std::chrono::seconds tolerance) {
  if (const auto failure = check_headers(input, now, tolerance)) return {.status = *failure};

  // The candidate signatures: `v1,<base64>` entries; other schemes (e.g. v1a) are skipped.
  std::vector<Mac> candidates;
  std::string_view list = input.signature;
  while (!list.empty()) {
    const std::size_t space = list.find(' ');
    const std::string_view entry = list.substr(0, space);
    list = space == std::string_view::npos ? std::string_view{} : list.substr(space + 1);
    if (!entry.starts_with(kSignatureVersion)) continue;
    std::vector<std::uint8_t> decoded;
    if (!base64_decode(entry.substr(kSignatureVersion.size()), decoded) || decoded.size() != kMacSize) continue;
    Mac mac{};
    std::copy(decoded.begin(), decoded.end(), mac.begin());
    candidates.push_back(mac);
  }
  if (candidates.empty()) return {.status = VerifyStatus::NoMatchingSignature};

  // Every key against every candidate, without stopping early: the time taken does
  // not tell an attacker which key or which signature came close.
  // The candidate keys are one tenant's (selected by key id), so this loop is short.
  const SigningKey* match = nullptr;
  std::size_t tried = 0;
  for (const SigningKey& key : keys) {
    const Mac expected = hmac_sha256(key.secret, input.id, input.timestamp, input.body);
    ++tried;
    for (const Mac& candidate : candidates)
      if (constant_time_equal(expected, candidate) && !match) match = &key;
  }
  if (!match) return {.status = VerifyStatus::NoMatchingSignature, .keys_tried = tried};
  return {.status = VerifyStatus::Verified, .tenant = match->tenant, .keys_tried = tried};
}

}  // namespace webhook
