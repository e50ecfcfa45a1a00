// Joining SQL text fragments at compile time, so two statements that share a list of
// statements spell it once.
#pragma once

#include <array>
#include <cstddef>

namespace boxcar::detail {

/// The string literals `parts` one after another, NUL-terminated: a constant usable as
/// `const char*` through .data().
template <std::size_t... N>
constexpr std::array<char, (N + ...) - sizeof...(N) + 1> concat_sql(const char (&... parts)[N]) {
  std::array<char, (N + ...) - sizeof...(N) + 1> joined{};
  std::size_t at = 0;
  const auto append = [&](const char* part, std::size_t size) {
    for (std::size_t i = 0; i + 1 < size; ++i) joined[at++] = part[i];
  };
  (append(parts, N), ...);
  return joined;
}

}  // namespace boxcar::detail
