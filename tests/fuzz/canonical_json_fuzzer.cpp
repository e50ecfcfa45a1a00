// canonicalize_text and the validator on arbitrary bytes. Properties:
// - it never crashes, and refuses only with a JsonValueError carrying a documented code;
// - text with a raw NUL byte is refused (nlohmann reads NUL as the end of the input);
// - accepted output is valid UTF-8, a fixed point (canonicalize_text(c) == c), parses
//   back with nlohmann, and canonicalize() of that value gives the same bytes;
// - tighter limits refuse (JSON_TOO_DEEP/JSON_TOO_LARGE) or agree, never differ;
// - format_es_number of the input's first 8 bytes as a double reads back as that double.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "boxcar/core/canonical_json.hpp"
#include "fuzz_check.hpp"

using boxcar::fuzz::check;

namespace {

bool documented(const std::string& code) {
  static const std::set<std::string> codes = {
      "JSON_PARSE_ERROR",          "JSON_DUPLICATE_KEY",     "JSON_NON_FINITE_NUMBER",
      "JSON_INTEGER_OUT_OF_RANGE", "JSON_UNSUPPORTED_VALUE", "JSON_INVALID_UTF8",
      "JSON_NUL_CHARACTER",        "JSON_TOO_DEEP",          "JSON_TOO_LARGE"};
  return codes.contains(code);
}

void check_number_text(const std::uint8_t* data, std::size_t size, std::string_view input) {
  if (size < sizeof(double)) return;
  double value = 0;
  std::memcpy(&value, data, sizeof value);
  if (!std::isfinite(value)) return;
  const std::string text = boxcar::format_es_number(value);
  check(std::strtod(text.c_str(), nullptr) == value, "format_es_number reads back as the same double", input);
  check(value != 0 || text == "0", "zero (and -0) print as 0", input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_number_text(data, size, input);

  std::string canonical;
  try {
    canonical = boxcar::canonicalize_text(input);
  } catch (const boxcar::JsonValueError& e) {
    check(documented(e.code()), "a refusal carries a documented JSON_* code", input);
    return 0;
  }
  check(input.find('\0') == std::string_view::npos, "text with a raw NUL byte is refused", input);
  check(boxcar::is_valid_utf8(canonical), "the canonical form is valid UTF-8", input);
  check(boxcar::canonicalize_text(canonical) == canonical, "the canonical form is a fixed point", input);
  const nlohmann::json parsed = nlohmann::json::parse(canonical);  // throws (a crash) if not JSON
  check(boxcar::canonicalize(parsed) == canonical, "the canonical form parses back to the same value", input);

  try {
    const std::string tight = boxcar::canonicalize_text(input, {.max_depth = 3, .max_bytes = 64});
    check(tight == canonical, "tighter limits do not change an accepted form", input);
  } catch (const boxcar::JsonValueError& e) {
    check(e.code() == "JSON_TOO_DEEP" || e.code() == "JSON_TOO_LARGE", "tighter limits refuse only by size or depth",
          input);
  }
  return 0;
}
