// RFC 8785 (JSON Canonicalization Scheme) for nlohmann::json values, and the
// validation that makes a value safe to fingerprint: a producer in any language that
// implements JCS computes the same bytes, and so the same SHA-256.
//
// Thread-safety: all functions are pure and may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "boxcar/core/error.hpp"

namespace boxcar {

/// Largest integer magnitude that a JSON number can carry exactly through an
/// IEEE-754 double (2^53 - 1), i.e. through every mainstream JSON implementation.
inline constexpr std::int64_t kMaxSafeInteger = 9007199254740991;

/// Smallest magnitude that RFC 8785 (ECMAScript) prints in exponent form ("1e+21").
inline constexpr double kMinExponentFormMagnitude = 1e21;

// The number rule (docs/schema.md, "Payload JSON"). It depends on the value only, never
// on the C++ type or the spelling in text: a number whose value is an integer beyond
// ±kMaxSafeInteger and below kMinExponentFormMagnitude in magnitude is refused
// (JSON_INTEGER_OUT_OF_RANGE), whether it is 1e17, 1.0e17, 100000000000000000, an
// int64_t or a double. Canonical JSON prints those as plain digits, which 64-bit integer
// parsers (PostgreSQL jsonb, nlohmann, Python, Jackson) read as an exact integer and
// double parsers (JavaScript) round: the same text, two values, and a payload that came
// back from storage would no longer canonicalise. Every other finite number is taken: a
// safe integer prints exactly, a fraction survives as its shortest round-trip decimal,
// and from 10^21 on the exponent form ("1e+30") is read as the same double everywhere.
// So the canonical form of an accepted value, stored in jsonb and parsed again by
// nlohmann, canonicalises to the same bytes.

struct CanonicalLimits {
  /// Deepest nesting of arrays/objects accepted; the root container is depth 1.
  std::size_t max_depth = 64;
  /// Largest canonical form accepted, in bytes.
  std::size_t max_bytes = 1024 * 1024;
};

/// Returns the RFC 8785 canonical form of `value`: object members sorted by the UTF-16
/// code units of their names, no insignificant whitespace, strings escaped minimally,
/// numbers serialised as ECMAScript's Number.prototype.toString does (-0 becomes 0).
///
/// @throws JsonValueError naming the JSON Pointer of the first offending value when the
///   value holds a NaN/Infinity (JSON_NON_FINITE_NUMBER), a number refused by the
///   number rule above (JSON_INTEGER_OUT_OF_RANGE), a binary or discarded value
///   (JSON_UNSUPPORTED_VALUE), a string or member name that is not valid UTF-8
///   (JSON_INVALID_UTF8) or contains U+0000 (JSON_NUL_CHARACTER, PostgreSQL cannot store
///   it), nesting deeper than limits.max_depth (JSON_TOO_DEEP), or a canonical form
///   longer than limits.max_bytes (JSON_TOO_LARGE). Nothing is ever truncated.
///   A bad member name is reported at the path of its object, since a pointer quoting
///   malformed bytes would carry them into logs. Recursion is bounded by
///   limits.max_depth, so keep that modest.
std::string canonicalize(const nlohmann::json& value, const CanonicalLimits& limits = {});

/// Parses JSON text strictly (duplicate member names are an error, JSON_DUPLICATE_KEY;
/// malformed text is JSON_PARSE_ERROR) and returns its canonical form.
///
/// A number literal denotes the nearest IEEE-754 double, as in JSON.parse and RFC 8785,
/// and the number rule applies to that value: 100000000000000000, 1e17 and 1.0e17 are
/// all JSON_INTEGER_OUT_OF_RANGE, and so is every integer literal beyond 64 bits below
/// 10^21, never a rounded number. A literal that overflows a double (1e400) is
/// JSON_NON_FINITE_NUMBER.
/// Ill-formed UTF-8 in the text is JSON_INVALID_UTF8. Nesting beyond limits.max_depth
/// is refused while parsing, so hostile depth costs neither stack nor memory. The
/// whole text is parsed before limits.max_bytes applies: bound the input size upstream.
/// A leading UTF-8 byte order mark is ignored (RFC 8259 §8.1 allows this).
std::string canonicalize_text(std::string_view json_text, const CanonicalLimits& limits = {});

/// The RFC 8785 §3.2.2.3 text of a finite double: ECMAScript's Number::toString
/// (shortest round-trip digits, exponent form below 10^-6 and from 10^21, -0 as "0").
/// Serialisation only: it applies no number rule, so 2^60 gives "1152921504606847000"
/// although canonicalize() refuses that value.
/// @throws JsonValueError (JSON_NON_FINITE_NUMBER) for NaN and infinities.
std::string format_es_number(double value);

/// Lower-case hexadecimal SHA-256 of `bytes` (64 characters).
/// @throws Error (INTERNAL_ERROR) only if OpenSSL itself fails, e.g. no usable provider.
std::string sha256_hex(std::string_view bytes);

/// The content fingerprint of an inbox message or outbox event: SHA-256 (hex) of the
/// canonical form of {"eventType": event_type, "schemaVersion": schema_version,
/// "payload": payload}. `canonical_payload` must already be canonical (the output of
/// canonicalize), so callers canonicalise a payload once and reuse the bytes; it is not
/// re-validated here.
///
/// @throws JsonValueError at path "/eventType" when event_type is not valid UTF-8 or
///   contains U+0000.
std::string content_fingerprint(std::string_view event_type, int schema_version, std::string_view canonical_payload);

/// True when `text` is well-formed UTF-8 (no overlongs, surrogates or code points
/// above U+10FFFF).
bool is_valid_utf8(std::string_view text) noexcept;

}  // namespace boxcar
