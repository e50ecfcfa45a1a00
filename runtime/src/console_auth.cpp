// The console's request guards (console_auth.hpp).
#include "console_auth.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace boxcar::detail {

bool constant_time_equals(std::string_view given, std::string_view expected) noexcept {
  // Every byte of `expected` is visited whatever `given` holds; a length mismatch is folded
  // into the same accumulator instead of returning early.
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const unsigned char mine = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    difference |= static_cast<unsigned char>(mine ^ static_cast<unsigned char>(expected[i]));
  }
  return difference == 0 && !expected.empty();
}

std::string random_hex_token(std::size_t bytes) {
  std::vector<unsigned char> random(bytes);
  std::size_t filled = 0;
  while (filled < bytes) {
    const auto n = ::getrandom(random.data() + filled, bytes - filled, 0);
    if (n < 0) throw std::runtime_error("getrandom failed: " + std::string(std::strerror(errno)));
    filled += static_cast<std::size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (const unsigned char b : random) {
    out += kHex[b >> 4];
    out += kHex[b & 0x0f];
  }
  return out;
}

std::string bearer_token(const char* authorization) {
  if (authorization == nullptr) return {};
  const std::string_view value(authorization);
  constexpr std::string_view kScheme = "Bearer ";
  if (value.size() <= kScheme.size() || value.substr(0, kScheme.size()) != kScheme) return {};
  return std::string(value.substr(kScheme.size()));
}

bool same_origin(const char* origin, const char* host) {
  if (origin == nullptr || host == nullptr || *host == '\0') return false;
  return std::string_view(origin) == "http://" + std::string(host);
}

}  // namespace boxcar::detail
