// SHA-256 hashing (OpenSSL EVP) and the content fingerprint of inbox messages and
// outbox events built on it.
#include <openssl/evp.h>

#include <array>
#include <memory>
#include <string>
#include <string_view>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/detail/json_string.hpp"
#include "boxcar/core/error.hpp"

namespace boxcar {

namespace {

// The SHA-256 implementation, looked up once: EVP_sha256() makes every EVP_Digest look it
// up in the provider store again (OpenSSL 3), under a lock all accepting threads share, and
// that lookup cost more than hashing a small payload. Null when no provider offers it;
// fetched algorithms are immutable, so one serves every thread.
const EVP_MD* sha256_algorithm() {
  static const std::unique_ptr<EVP_MD, decltype(&EVP_MD_free)> algorithm(EVP_MD_fetch(nullptr, "SHA256", nullptr),
                                                                         &EVP_MD_free);
  return algorithm.get();
}

}  // namespace

std::string sha256_hex(std::string_view bytes) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_size = 0;
  // Fails only when OpenSSL itself is broken (e.g. a FIPS provider that refuses to load);
  // a fingerprint must never silently be empty, so surface it.
  const EVP_MD* algorithm = sha256_algorithm();
  if (algorithm == nullptr ||
      EVP_Digest(bytes.data(), bytes.size(), digest.data(), &digest_size, algorithm, nullptr) != 1 ||
      digest_size != 32) {
    throw Error("INTERNAL_ERROR", "OpenSSL SHA-256 computation failed");
  }

  static constexpr char kHexDigits[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(2 * digest_size);
  for (unsigned int i = 0; i < digest_size; ++i) {
    hex.push_back(kHexDigits[digest[i] >> 4]);
    hex.push_back(kHexDigits[digest[i] & 0x0F]);
  }
  return hex;
}

std::string content_fingerprint(std::string_view event_type, int schema_version, std::string_view canonical_payload) {
  // A plain type (the usual dotted name) is written as it is, the bytes canonicalize()
  // would write, without building a JSON value. Any other is canonicalised as a JSON
  // string by the one JCS string escaper with its UTF-8/NUL checks; the error is
  // re-pointed at the envelope member so the caller learns which input was wrong.
  std::string canonical_event_type;
  if (detail::is_plain_json_string(event_type)) {
    canonical_event_type.reserve(event_type.size() + 2);
    canonical_event_type += '"';
    canonical_event_type += event_type;
    canonical_event_type += '"';
  } else {
    try {
      canonical_event_type = canonicalize(nlohmann::json(std::string(event_type)));
    } catch (const JsonValueError& e) {
      throw JsonValueError(e.code(), "/eventType", "event type is not fingerprintable");
    }
  }

  // Members in JCS order (eventType < payload < schemaVersion), so the envelope is
  // itself canonical without building and re-sorting a JSON object.
  std::string envelope;
  envelope.reserve(canonical_event_type.size() + canonical_payload.size() + 64);
  envelope += R"({"eventType":)";
  envelope += canonical_event_type;
  envelope += R"(,"payload":)";
  envelope += canonical_payload;
  envelope += R"(,"schemaVersion":)";
  envelope += std::to_string(schema_version);
  envelope += '}';
  return sha256_hex(envelope);
}

}  // namespace boxcar
