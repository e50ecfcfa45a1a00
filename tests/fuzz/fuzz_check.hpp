// What a harness does when a property fails: print what and the input, then abort, so
// libFuzzer saves the input as a crash and the replay test fails.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace boxcar::fuzz {

/// The input, printable: bytes outside ASCII's printable range as \xNN.
inline void print_input(std::string_view input) {
  std::fputs("input: \"", stderr);
  for (const char c : input.substr(0, 2048)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\' && c != '"')
      std::fputc(c, stderr);
    else
      std::fprintf(stderr, "\\x%02x", u);
  }
  std::fputs(input.size() > 2048 ? "\"...\n" : "\"\n", stderr);
}

[[noreturn]] inline void fail(const char* property, std::string_view input) {
  std::fprintf(stderr, "fuzz property violated: %s\n", property);
  print_input(input);
  std::abort();
}

/// Checks `condition`; on failure reports `property` with the input and aborts.
inline void check(bool condition, const char* property, std::string_view input) {
  if (!condition) fail(property, input);
}

}  // namespace boxcar::fuzz
