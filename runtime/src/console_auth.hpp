// The console's request guards (docs/console.md, "Who may act"): the admin token and the
// CSRF token compared in constant time, the same-origin check of a write, and the random
// tokens themselves.
#pragma once

#include <string>
#include <string_view>

namespace boxcar::detail {

/// Whether `given` equals `expected`, in a time that depends only on `expected`'s length
/// (the secret's), never on where the first difference is.
bool constant_time_equals(std::string_view given, std::string_view expected) noexcept;

/// `bytes` random bytes from the kernel (getrandom), hex-encoded.
/// @throws std::runtime_error when the kernel has no randomness to give.
std::string random_hex_token(std::size_t bytes);

/// The token of an "Authorization: Bearer TOKEN" header value; empty when the header is
/// missing or of another scheme.
std::string bearer_token(const char* authorization);

/// A write's same-origin check: an Origin header is present and is exactly
/// "http://" + the Host header (the address the browser sent the request to). Browsers
/// set Origin on every cross-origin request and on every POST; a page of another origin
/// cannot forge it.
bool same_origin(const char* origin, const char* host);

}  // namespace boxcar::detail
