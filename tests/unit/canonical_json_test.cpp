// Unit tests for RFC 8785 canonicalisation, UTF-8 validation, SHA-256 and content
// fingerprints, anchored on the RFC's own examples and independently computed digests.
#include "boxcar/core/canonical_json.hpp"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "boxcar/core/error.hpp"

namespace {

using nlohmann::json;

struct Failure {
  std::string code;
  std::string path;
};

/// Runs `action` and reports the JsonValueError it threw, so a test can check both the
/// code and the pointer in one REQUIRE.
template <typename Action>
Failure failure_of(Action&& action) {
  try {
    action();
  } catch (const boxcar::JsonValueError& e) {
    return Failure{e.code(), e.path()};
  }
  return Failure{"<no error>", ""};
}

Failure canonicalize_failure(const json& value, const boxcar::CanonicalLimits& limits = {}) {
  return failure_of([&] { (void)boxcar::canonicalize(value, limits); });
}

Failure text_failure(std::string_view text, const boxcar::CanonicalLimits& limits = {}) {
  return failure_of([&] { (void)boxcar::canonicalize_text(text, limits); });
}

/// The RFC 8785 text of a double, whether or not the number rule lets a document hold
/// it: Appendix B includes integers such as 2^68 that canonicalize() refuses.
std::string canonical_number(std::uint64_t ieee_bits) {
  return boxcar::format_es_number(std::bit_cast<double>(ieee_bits));
}

/// What PostgreSQL's jsonb prints for a number: numeric's plain decimal notation, never
/// an exponent ("1e-7" comes back as "0.0000001", "1e+21" as 22 digits).
std::string plain_decimal(const std::string& number) {
  std::string digits;
  std::string sign;
  std::size_t i = 0;
  if (number[0] == '-') {
    sign = "-";
    i = 1;
  }
  int point = -1;  // digits before the decimal point
  for (; i < number.size() && number[i] != 'e'; ++i) {
    if (number[i] == '.') {
      point = static_cast<int>(digits.size());
    } else {
      digits.push_back(number[i]);
    }
  }
  if (point < 0) point = static_cast<int>(digits.size());
  if (i < number.size()) point += std::stoi(number.substr(i + 1));
  if (point <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  if (point >= static_cast<int>(digits.size())) {
    return sign + digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  }
  return sign + digits.substr(0, static_cast<std::size_t>(point)) + "." +
         digits.substr(static_cast<std::size_t>(point));
}

/// Builds [[[...]]] with `depth` arrays without recursion or quadratic copying.
json nested_arrays(std::size_t depth) {
  json value = json::array();
  for (std::size_t i = 1; i < depth; ++i) {
    json outer = json::array();
    outer.push_back(std::move(value));
    value = std::move(outer);
  }
  return value;
}

std::string nested_array_text(std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); }

}  // namespace

TEST_CASE("RFC 8785 section 3.2.2 sample object canonicalises to the published output", "[canonical_json]") {
  const std::string input = R"json({
    "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
    "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
    "literals": [null, true, false]
  })json";
  const std::string expected = R"json({"literals":[null,true,false],)json"
                               R"json("numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":")json"
                               "\xe2\x82\xac"
                               R"json($\u000f\nA'B\"\\\\\"/"})json";

  CHECK(boxcar::canonicalize_text(input) == expected);
  CHECK(boxcar::canonicalize(json::parse(input)) == expected);
}

TEST_CASE("RFC 8785 section 3.2.3 sorting example orders members by UTF-16 code units", "[canonical_json]") {
  const std::string input = R"json({
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\ud83d\ude00": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis"
  })json";
  // Expected order per the RFC: \r, 1, U+0080, U+00F6, U+20AC, U+1F600, U+FB33.
  const std::string expected = std::string(R"({"\r":"Carriage Return","1":"One",")") + "\xc2\x80" + R"(":"Control",")" +
                               "\xc3\xb6" + R"(":"Latin Small Letter O With Diaeresis",")" + "\xe2\x82\xac" +
                               R"(":"Euro Sign",")" + "\xf0\x9f\x98\x80" + R"(":"Emoji: Grinning Face",")" +
                               "\xef\xac\xb3" + R"(":"Hebrew Letter Dalet With Dagesh"})";

  CHECK(boxcar::canonicalize_text(input) == expected);
}

TEST_CASE("Member names above U+FFFF sort before U+E000..U+FFFF although UTF-8 bytes say otherwise",
          "[canonical_json][unicode]") {
  const std::string private_use = "\xee\x80\x80";        // U+E000, UTF-8 EE 80 80
  const std::string replacement = "\xef\xbf\xbd";        // U+FFFD, UTF-8 EF BF BD
  const std::string grinning_face = "\xf0\x9f\x98\x80";  // U+1F600, UTF-16 D83D DE00
  const std::string linear_b = "\xf0\x90\x80\x80";       // U+10000, UTF-16 D800 DC00

  json value = json::object();
  value[private_use] = 1;
  value[replacement] = 2;
  value[grinning_face] = 3;
  value[linear_b] = 4;
  value["z"] = 5;

  // nlohmann's own (byte-ordered) dump puts the 4-byte sequences last.
  REQUIRE(value.dump().find(private_use) < value.dump().find(linear_b));

  const std::string expected = "{\"z\":5,\"" + linear_b + "\":4,\"" + grinning_face + "\":3,\"" + private_use +
                               "\":1,\"" + replacement + "\":2}";
  CHECK(boxcar::canonicalize(value) == expected);
}

TEST_CASE("Numbers are serialised like ECMAScript per RFC 8785 Appendix B", "[canonical_json][numbers]") {
  const std::pair<std::uint64_t, const char*> vectors[] = {
      {0x0000000000000000, "0"},
      {0x8000000000000000, "0"},
      {0x0000000000000001, "5e-324"},
      {0x8000000000000001, "-5e-324"},
      {0x7fefffffffffffff, "1.7976931348623157e+308"},
      {0xffefffffffffffff, "-1.7976931348623157e+308"},
      {0x4340000000000000, "9007199254740992"},
      {0xc340000000000000, "-9007199254740992"},
      {0x4430000000000000, "295147905179352830000"},
      {0x44b52d02c7e14af5, "9.999999999999997e+22"},
      {0x44b52d02c7e14af6, "1e+23"},
      {0x44b52d02c7e14af7, "1.0000000000000001e+23"},
      {0x444b1ae4d6e2ef4e, "999999999999999700000"},
      {0x444b1ae4d6e2ef4f, "999999999999999900000"},
      {0x444b1ae4d6e2ef50, "1e+21"},
      {0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
      {0x3eb0c6f7a0b5ed8d, "0.000001"},
      {0x41b3de4355555553, "333333333.3333332"},
      {0x41b3de4355555554, "333333333.33333325"},
      {0x41b3de4355555555, "333333333.3333333"},
      {0x41b3de4355555556, "333333333.3333334"},
      {0x41b3de4355555557, "333333333.33333343"},
      {0xbecbf647612f3696, "-0.0000033333333333333333"},
      {0x43143ff3c1cb0959, "1424953923781206.2"},
  };
  for (const auto& [bits, expected] : vectors) {
    INFO("IEEE-754 bits 0x" << std::hex << bits);
    CHECK(canonical_number(bits) == expected);
  }
}

TEST_CASE("Every ECMAScript number layout is produced at its boundaries", "[canonical_json][numbers]") {
  const std::pair<double, const char*> vectors[] = {
      // Integral floats print without a fraction, up to 21 digits.
      {1.0, "1"},
      {-1.0, "-1"},
      {100.0, "100"},
      {1e20, "100000000000000000000"},
      {123e18, "123000000000000000000"},
      // From 10^21 on, exponent form.
      {1e21, "1e+21"},
      {1.5e21, "1.5e+21"},
      {1e300, "1e+300"},
      // Decimal point inside the digits.
      {1.5, "1.5"},
      {123.456, "123.456"},
      {-0.5, "-0.5"},
      // Leading zeros down to 10^-6, exponent form below.
      {0.1, "0.1"},
      {0.000001, "0.000001"},
      {0.0000015, "0.0000015"},
      {1e-7, "1e-7"},
      {1.5e-7, "1.5e-7"},
      {-1.5e-7, "-1.5e-7"},
      // Shortest round-trip digits rather than the exact binary value.
      {0.1 + 0.2, "0.30000000000000004"},
      {-0.0, "0"},
  };
  for (const auto& [value, expected] : vectors) {
    INFO("value " << value);
    CHECK(boxcar::format_es_number(value) == expected);
  }
}

TEST_CASE("NaN and infinities are rejected with the path of the number", "[canonical_json][numbers]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();

  for (const double value : {nan, inf, -inf, std::bit_cast<double>(std::uint64_t{0x7ff0000000000000}),
                             std::bit_cast<double>(std::uint64_t{0x7fffffffffffffff})}) {
    const Failure root = canonicalize_failure(json(value));
    CHECK(root.code == "JSON_NON_FINITE_NUMBER");
    CHECK(root.path.empty());
  }

  CHECK(failure_of([&] { (void)boxcar::format_es_number(nan); }).code == "JSON_NON_FINITE_NUMBER");
  CHECK(failure_of([&] { (void)boxcar::format_es_number(-inf); }).code == "JSON_NON_FINITE_NUMBER");

  const json nested = {{"a", json::array({1, json::object({{"b", nan}})})}};
  const Failure failure = canonicalize_failure(nested);
  CHECK(failure.code == "JSON_NON_FINITE_NUMBER");
  CHECK(failure.path == "/a/1/b");
}

TEST_CASE("Integers at the safe-integer boundaries pass and one beyond fails", "[canonical_json][numbers]") {
  CHECK(boxcar::kMaxSafeInteger == (std::int64_t{1} << 53) - 1);

  CHECK(boxcar::canonicalize(json(std::int64_t{9007199254740991})) == "9007199254740991");
  CHECK(boxcar::canonicalize(json(std::int64_t{-9007199254740991})) == "-9007199254740991");
  CHECK(boxcar::canonicalize(json(std::uint64_t{9007199254740991})) == "9007199254740991");
  CHECK(boxcar::canonicalize(json(std::int64_t{0})) == "0");
  CHECK(boxcar::canonicalize(json(std::int64_t{-42})) == "-42");

  for (const json& too_big :
       {json(std::int64_t{9007199254740992}), json(std::int64_t{-9007199254740992}),
        json(std::uint64_t{9007199254740992}), json(std::numeric_limits<std::int64_t>::min()),
        json(std::numeric_limits<std::int64_t>::max()), json(std::numeric_limits<std::uint64_t>::max())}) {
    const Failure failure = canonicalize_failure(json::array({0, too_big}));
    CHECK(failure.code == "JSON_INTEGER_OUT_OF_RANGE");
    CHECK(failure.path == "/1");
  }

  // The same limits apply to integer literals in text.
  CHECK(boxcar::canonicalize_text("[9007199254740991,-9007199254740991]") == "[9007199254740991,-9007199254740991]");
  CHECK(text_failure("9007199254740992").code == "JSON_INTEGER_OUT_OF_RANGE");
  CHECK(text_failure("-9007199254740992").code == "JSON_INTEGER_OUT_OF_RANGE");
}

TEST_CASE("An integer beyond 2^53-1 is refused whatever its C++ type or spelling", "[canonical_json][numbers]") {
  for (const json& value : {json(1e17), json(std::int64_t{100000000000000000}), json(std::uint64_t{100000000000000000}),
                            json(-1e17), json(9007199254740992.0), json(-9007199254740992.0),
                            json(std::bit_cast<double>(std::uint64_t{0x4340000000000001})), json(1152921504606846976.0),
                            json(1e20), json(123e18)}) {
    INFO("value " << value.dump());
    const Failure failure = canonicalize_failure({{"n", value}});
    CHECK(failure.code == "JSON_INTEGER_OUT_OF_RANGE");
    CHECK(failure.path == "/n");
  }

  for (const char* text :
       {"1e17", "1E17", "1e+17", "1.0e17", "100000000000000000", "100000000000000000.0", "10000000000000000e1",
        "1000000000000000000e-1", "-1e17", "9007199254740992", "9007199254740992.0", "9.007199254740992e15",
        "9007199254740993", "-1E20", "9.99999999999999e20"}) {
    INFO("literal " << text);
    const Failure failure = text_failure(std::string("[0,") + text + "]");
    CHECK(failure.code == "JSON_INTEGER_OUT_OF_RANGE");
    CHECK(failure.path == "/1");
  }
}

TEST_CASE("The largest safe integer passes in every spelling and prints as plain digits", "[canonical_json][numbers]") {
  CHECK(boxcar::canonicalize(json(9007199254740991.0)) == "9007199254740991");
  CHECK(boxcar::canonicalize(json(-9007199254740991.0)) == "-9007199254740991");
  for (const char* text : {"9007199254740991", "9007199254740991.0", "9.007199254740991e15", "90071992547409910e-1",
                           "9007199254740991.00000000000000000000"}) {
    INFO("literal " << text);
    CHECK(boxcar::canonicalize_text(text) == "9007199254740991");
  }
  // The largest doubles with a fraction sit just below 2^52 and keep it.
  CHECK(boxcar::canonicalize(json(4503599627370495.5)) == "4503599627370495.5");
  CHECK(boxcar::canonicalize_text("1e15") == "1000000000000000");
}

TEST_CASE("Numbers from 1e21 on are taken in exponent form however they are written", "[canonical_json][numbers]") {
  CHECK(boxcar::canonicalize(json(1e21)) == "1e+21");
  CHECK(boxcar::canonicalize(json(-1e21)) == "-1e+21");
  CHECK(boxcar::canonicalize(json(1e300)) == "1e+300");
  CHECK(boxcar::canonicalize(json(std::numeric_limits<double>::max())) == "1.7976931348623157e+308");
  // A literal denotes its nearest double, as in JSON.parse: 10^21 - 1 is 1e21.
  for (const char* text : {"1e21", "1E+21", "1.0e21", "1000000000000000000000", "1000000000000000000000.000", "10e20",
                           "999999999999999999999"}) {
    INFO("literal " << text);
    CHECK(boxcar::canonicalize_text(text) == "1e+21");
  }
  // The double just below 10^21 prints as 21 digits, so it is refused.
  CHECK(canonicalize_failure(json(std::nextafter(1e21, 0.0))).code == "JSON_INTEGER_OUT_OF_RANGE");
}

TEST_CASE("Every RFC 8785 Appendix B number is either refused or canonical", "[canonical_json][numbers]") {
  // The Appendix B integers between 2^53 and 10^21 print as digits a 64-bit reader
  // takes for another value; the rest are canonical as the appendix prints them.
  for (const std::uint64_t bits : std::initializer_list<std::uint64_t>{
           0x4340000000000000, 0xc340000000000000, 0x4430000000000000, 0x444b1ae4d6e2ef4e, 0x444b1ae4d6e2ef4f}) {
    INFO("IEEE-754 bits 0x" << std::hex << bits);
    CHECK(canonicalize_failure(json(std::bit_cast<double>(bits))).code == "JSON_INTEGER_OUT_OF_RANGE");
  }
  for (const std::uint64_t bits : std::initializer_list<std::uint64_t>{
           0x7fefffffffffffff, 0x44b52d02c7e14af6, 0x444b1ae4d6e2ef50, 0x0000000000000001, 0x43143ff3c1cb0959}) {
    INFO("IEEE-754 bits 0x" << std::hex << bits);
    CHECK(boxcar::canonicalize(json(std::bit_cast<double>(bits))) == canonical_number(bits));
  }
}

TEST_CASE(
    "Every number canonicalize takes reads back to the same canonical form "
    "from its own text and from jsonb's plain decimal digits",
    "[canonical_json][numbers]") {
  // 50,000 doubles spread over every exponent (subnormals included) plus integers near
  // each boundary of the rule. nlohmann reads digits within 64 bits as integers, so any
  // refused-but-needed value or lossy form would show up here.
  std::vector<double> values = {0.0,
                                -0.0,
                                5e-324,
                                -5e-324,
                                2.2250738585072014e-308,
                                1e-7,
                                1e-6,
                                0.1,
                                1.0,
                                4503599627370495.5,
                                1e21,
                                1e300,
                                std::numeric_limits<double>::max()};
  for (double n = 9007199254740991.0 - 4; n <= 9007199254740991.0; n += 1) {
    values.push_back(n);
    values.push_back(-n);
  }
  std::uint64_t state = 0x9e3779b97f4a7c15;  // splitmix64: the same values every run
  const auto next = [&state] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9;
    z = (z ^ (z >> 27)) * 0x94d049bb133111eb;
    return z ^ (z >> 31);
  };
  while (values.size() < 50000) values.push_back(std::bit_cast<double>(next()));

  std::size_t taken = 0;
  std::size_t refused = 0;
  for (const double value : values) {
    if (!std::isfinite(value)) continue;
    std::string canonical;
    try {
      canonical = boxcar::canonicalize(json(value));
    } catch (const boxcar::JsonValueError& e) {
      REQUIRE(e.code() == "JSON_INTEGER_OUT_OF_RANGE");
      REQUIRE(std::fabs(value) > 9007199254740991.0);
      REQUIRE(std::fabs(value) < 1e21);
      ++refused;
      continue;
    }
    ++taken;
    INFO("value " << canonical);
    REQUIRE(boxcar::canonicalize(json::parse(canonical)) == canonical);
    REQUIRE(boxcar::canonicalize(json::parse(plain_decimal(canonical))) == canonical);
    REQUIRE(boxcar::canonicalize_text(canonical) == canonical);
  }
  CHECK(taken > 47000);
  CHECK(refused > 100);
}

TEST_CASE("Integer literals beyond 64 bits and below 1e21 are refused, never rounded", "[canonical_json][numbers]") {
  // nlohmann would store these as approximate doubles; that must not be fingerprinted.
  const Failure above_uint64 = text_failure(R"({"n":18446744073709551616})");
  CHECK(above_uint64.code == "JSON_INTEGER_OUT_OF_RANGE");
  CHECK(above_uint64.path == "/n");

  const Failure below_int64 = text_failure("[1,-9223372036854775809]");
  CHECK(below_int64.code == "JSON_INTEGER_OUT_OF_RANGE");
  CHECK(below_int64.path == "/1");

  CHECK(text_failure("18446744073709551615").code == "JSON_INTEGER_OUT_OF_RANGE");
}

TEST_CASE("Number literals that overflow a double are rejected as non-finite", "[canonical_json][numbers]") {
  const Failure overflow = text_failure(R"({"a":[0,1e400]})");
  CHECK(overflow.code == "JSON_NON_FINITE_NUMBER");
  CHECK(overflow.path == "/a/1");
  CHECK(text_failure("-1E400").code == "JSON_NON_FINITE_NUMBER");

  // Underflow is the ordinary IEEE-754 rounding every JCS implementation performs.
  CHECK(boxcar::canonicalize_text("1e-400") == "0");
}

TEST_CASE("Member order in the input does not change the canonical form or fingerprint",
          "[canonical_json][fingerprint]") {
  const std::string a = boxcar::canonicalize_text(R"({"b":2,"a":{"y":[1,2],"x":null},"c":"s"})");
  const std::string b = boxcar::canonicalize_text(R"({"c":"s","a":{"x":null,"y":[1,2]},"b":2})");
  CHECK(a == R"({"a":{"x":null,"y":[1,2]},"b":2,"c":"s"})");
  CHECK(a == b);
  CHECK(boxcar::content_fingerprint("t", 1, a) == boxcar::content_fingerprint("t", 1, b));
}

TEST_CASE("Array element order changes the canonical form and fingerprint", "[canonical_json][fingerprint]") {
  const std::string a = boxcar::canonicalize_text("[1,2,3]");
  const std::string b = boxcar::canonicalize_text("[3,2,1]");
  CHECK(a != b);
  CHECK(boxcar::content_fingerprint("t", 1, a) != boxcar::content_fingerprint("t", 1, b));
}

TEST_CASE("Strings escape quotes, backslashes and C0 controls minimally and keep the rest raw",
          "[canonical_json][unicode]") {
  CHECK(boxcar::canonicalize(json("\"\\/")) == R"("\"\\/")");
  CHECK(boxcar::canonicalize(json("\b\t\n\f\r")) == R"("\b\t\n\f\r")");
  CHECK(boxcar::canonicalize(json("\x01\x0b\x1f")) == R"("\u0001\u000b\u001f")");
  CHECK(boxcar::canonicalize(json("\x7f")) == "\"\x7f\"");
  CHECK(boxcar::canonicalize(json("\xe2\x80\xa8")) == "\"\xe2\x80\xa8\"");  // U+2028 raw
  CHECK(boxcar::canonicalize(json("caf\xc3\xa9 \xf0\x9f\x98\x80")) == "\"caf\xc3\xa9 \xf0\x9f\x98\x80\"");

  // Every control character except NUL, escaped exactly once and in lower case.
  std::string controls;
  for (char c = 1; c < 0x20; ++c) {
    controls.push_back(c);
  }
  CHECK(boxcar::canonicalize(json(controls)) ==
        R"("\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f)"
        R"(\u0010\u0011\u0012\u0013\u0014\u0015\u0016\u0017)"
        R"(\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f")");

  // Member names are escaped the same way; text escapes are decoded then re-encoded.
  CHECK(boxcar::canonicalize_text(R"({"\u001F\u007f\u00E9":"\/"})") == "{\"\\u001f\x7f\xc3\xa9\":\"/\"}");
}

TEST_CASE("Invalid UTF-8 is rejected with the path of the offending value", "[canonical_json][unicode]") {
  json value = {{"ok", "fine"}, {"list", json::array({"a", "b\xff"})}};
  Failure failure = canonicalize_failure(value);
  CHECK(failure.code == "JSON_INVALID_UTF8");
  CHECK(failure.path == "/list/1");

  // A lone surrogate encoded directly (CESU-style) is not UTF-8 either.
  failure = canonicalize_failure(json::array({json::object({{"s", "\xed\xa0\x80"}})}));
  CHECK(failure.code == "JSON_INVALID_UTF8");
  CHECK(failure.path == "/0/s");

  // A bad member name is reported at its object: the name itself cannot be quoted.
  json bad_name = json::object();
  bad_name["outer"]["\xc0\xaf"] = 1;
  failure = canonicalize_failure(bad_name);
  CHECK(failure.code == "JSON_INVALID_UTF8");
  CHECK(failure.path == "/outer");

  // In text, the parser stops at the bad byte and reports where it was.
  failure = text_failure("{\"k\":[\"ok\",\"\xf8\"]}");
  CHECK(failure.code == "JSON_INVALID_UTF8");
  CHECK(failure.path == "/k/1");
}

TEST_CASE("U+0000 in a string or member name is rejected", "[canonical_json][unicode]") {
  Failure failure = canonicalize_failure(json::object({{"a", std::string("x\0y", 3)}}));
  CHECK(failure.code == "JSON_NUL_CHARACTER");
  CHECK(failure.path == "/a");

  json bad_name = json::object();
  bad_name[std::string("k\0", 2)] = true;
  failure = canonicalize_failure(bad_name);
  CHECK(failure.code == "JSON_NUL_CHARACTER");
  CHECK(failure.path.empty());

  failure = text_failure(R"({"a":["\u0000"]})");
  CHECK(failure.code == "JSON_NUL_CHARACTER");
  CHECK(failure.path == "/a/0");
}

TEST_CASE("is_valid_utf8 accepts well-formed text and rejects every ill-formed shape", "[utf8][unicode]") {
  for (const std::string good :
       {"", "plain ascii", "\x7f", "\xc2\x80", "\xdf\xbf", "\xe0\xa0\x80", "\xed\x9f\xbf", "\xee\x80\x80",
        "\xef\xbf\xbf", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf", "mixed \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80 end"}) {
    INFO("input " << json(good).dump());
    CHECK(boxcar::is_valid_utf8(good));
  }
  CHECK(boxcar::is_valid_utf8(std::string("a\0b", 3)));  // NUL is valid UTF-8

  const char* const bad[] = {
      "\x80",                      // lone continuation byte
      "\xbf",                      // lone continuation byte
      "\xc0\x80",                  // overlong NUL
      "\xc1\xbf",                  // overlong 2-byte
      "\xe0\x80\x80",              // overlong 3-byte
      "\xe0\x9f\xbf",              // overlong 3-byte (U+07FF)
      "\xf0\x80\x80\x80",          // overlong 4-byte
      "\xf0\x8f\xbf\xbf",          // overlong 4-byte (U+FFFF)
      "\xed\xa0\x80",              // U+D800
      "\xed\xbf\xbf",              // U+DFFF
      "\xed\xa0\xbd\xed\xb8\x80",  // surrogate pair encoded as two 3-byte sequences
      "\xf4\x90\x80\x80",          // U+110000
      "\xf5\x80\x80\x80",          // lead byte beyond the range
      "\xff",                      // never valid
      "\xc3",                      // truncated 2-byte
      "\xe2\x82",                  // truncated 3-byte
      "\xf0\x9f\x98",              // truncated 4-byte
      "\xe2\x28\xa1",              // bad continuation
      "ok\xc3(",                   // lead byte followed by ASCII
  };
  for (const char* text : bad) {
    INFO("input bytes " << json::binary(std::vector<std::uint8_t>(text, text + std::strlen(text))).dump());
    CHECK_FALSE(boxcar::is_valid_utf8(text));
  }
}

TEST_CASE("Nesting exactly at the depth limit passes and one level more fails", "[canonical_json][limits]") {
  boxcar::CanonicalLimits limits;
  limits.max_depth = 3;

  CHECK(boxcar::canonicalize(json::parse(R"({"a":[{"b":1}]})"), limits) == R"({"a":[{"b":1}]})");
  CHECK(boxcar::canonicalize_text(R"({"a":[{"b":1}]})", limits) == R"({"a":[{"b":1}]})");
  // Scalars do not add depth.
  CHECK(boxcar::canonicalize_text("1", boxcar::CanonicalLimits{0, 16}) == "1");

  Failure failure = canonicalize_failure(json::parse(R"({"a":[{"b":[]}]})"), limits);
  CHECK(failure.code == "JSON_TOO_DEEP");
  CHECK(failure.path == "/a/0/b");
  failure = text_failure(R"({"a":[{"b":{}}]})", limits);
  CHECK(failure.code == "JSON_TOO_DEEP");
  CHECK(failure.path == "/a/0/b");

  // The default limit, 64.
  CHECK(boxcar::canonicalize(nested_arrays(64)) == nested_array_text(64));
  CHECK(boxcar::canonicalize_text(nested_array_text(64)) == nested_array_text(64));
  CHECK(canonicalize_failure(nested_arrays(65)).code == "JSON_TOO_DEEP");
  failure = text_failure(nested_array_text(65));
  CHECK(failure.code == "JSON_TOO_DEEP");
  std::string expected_path;
  for (int i = 0; i < 64; ++i) {
    expected_path += "/0";
  }
  CHECK(failure.path == expected_path);
}

TEST_CASE("A 100,000-deep document is refused as too deep instead of overflowing the stack",
          "[canonical_json][limits]") {
  CHECK(text_failure(nested_array_text(100'000)).code == "JSON_TOO_DEEP");
  CHECK(text_failure(std::string(100'000, '[')).code == "JSON_TOO_DEEP");  // unterminated too

  std::string deep_objects;
  for (int i = 0; i < 100'000; ++i) {
    deep_objects += R"({"a":)";
  }
  CHECK(text_failure(deep_objects).code == "JSON_TOO_DEEP");

  CHECK(canonicalize_failure(nested_arrays(100'000)).code == "JSON_TOO_DEEP");
}

TEST_CASE("Canonical output longer than the size limit is rejected", "[canonical_json][limits]") {
  boxcar::CanonicalLimits limits;
  limits.max_bytes = 13;  // exactly {"a":[1,2,3]}

  CHECK(boxcar::canonicalize_text(R"({ "a" : [1, 2, 3] })", limits) == R"({"a":[1,2,3]})");
  limits.max_bytes = 12;  // only the closing brace of the root is missing
  Failure failure = text_failure(R"({"a":[1,2,3]})", limits);
  CHECK(failure.code == "JSON_TOO_LARGE");
  CHECK(failure.path.empty());
  limits.max_bytes = 10;  // {"a":[1,2, fits, the 3 does not
  failure = text_failure(R"({"a":[1,2,3]})", limits);
  CHECK(failure.code == "JSON_TOO_LARGE");
  CHECK(failure.path == "/a/2");

  // Escapes count towards the limit: "\u0001" is 8 bytes once quoted.
  limits.max_bytes = 8;
  CHECK(boxcar::canonicalize(json("\x01"), limits) == R"("\u0001")");
  limits.max_bytes = 7;
  CHECK(canonicalize_failure(json("\x01"), limits).code == "JSON_TOO_LARGE");

  // A string far beyond the default 1 MiB is refused, with its path.
  const json huge = {{"small", 1}, {"text", std::string(64 * 1024 * 1024, 'x')}};
  failure = canonicalize_failure(huge);
  CHECK(failure.code == "JSON_TOO_LARGE");
  CHECK(failure.path == "/text");

  // Many small members add up as well.
  json many = json::array();
  for (int i = 0; i < 300'000; ++i) {
    many.push_back(i);
  }
  failure = canonicalize_failure(many);
  CHECK(failure.code == "JSON_TOO_LARGE");
  CHECK(failure.path.rfind("/", 0) == 0);
}

TEST_CASE("Binary and discarded values are rejected as unsupported", "[canonical_json]") {
  json value = json::object();
  value["data"] = json::array({1, json::binary({0x01, 0x02})});
  Failure failure = canonicalize_failure(value);
  CHECK(failure.code == "JSON_UNSUPPORTED_VALUE");
  CHECK(failure.path == "/data/1");

  failure = canonicalize_failure(json(json::value_t::discarded));
  CHECK(failure.code == "JSON_UNSUPPORTED_VALUE");
  CHECK(failure.path.empty());
}

TEST_CASE("Duplicate member names in text are rejected with the member's path", "[canonical_json][parse]") {
  Failure failure = text_failure(R"({"a":1,"a":1})");
  CHECK(failure.code == "JSON_DUPLICATE_KEY");
  CHECK(failure.path == "/a");

  failure = text_failure(R"({"x":[{"k":1,"j":2,"k":3}]})");
  CHECK(failure.code == "JSON_DUPLICATE_KEY");
  CHECK(failure.path == "/x/0/k");

  // Names that differ only in escaping are the same name.
  failure = text_failure(R"({"\u0061":1,"a":2})");
  CHECK(failure.code == "JSON_DUPLICATE_KEY");
  CHECK(failure.path == "/a");

  // The same name in different objects is fine.
  CHECK(boxcar::canonicalize_text(R"({"a":{"a":1},"b":{"a":2}})") == R"({"a":{"a":1},"b":{"a":2}})");
}

TEST_CASE("Malformed JSON text is a parse error", "[canonical_json][parse]") {
  for (const char* text : {"",
                           " ",
                           "{",
                           "[1,]",
                           R"({"a":1,})",
                           R"({"a" 1})",
                           "01",
                           "1 2",
                           "NaN",
                           "Infinity",
                           "'a'",
                           "[1] // comment",
                           "/* c */ 1",
                           "{a:1}",
                           R"("\x41")",
                           R"("\ud800")",
                           R"("\udc00\ud800")",
                           "tru",
                           "[\"a\tb\"]",
                           "+1",
                           ".5",
                           "1."}) {
    INFO("text " << text);
    CHECK(text_failure(text).code == "JSON_PARSE_ERROR");
  }
  const Failure nested = text_failure(R"({"a":{"b":[1,}}})");
  CHECK(nested.code == "JSON_PARSE_ERROR");
  CHECK(nested.path == "/a/b/1");
  CHECK(text_failure(R"({"a":1,"b":})").path == "/b");
  CHECK(text_failure(R"({"a":{"b":1 "c":2}})").path == "/a");
  CHECK(text_failure("[1] x").path.empty());

  // A UTF-8 byte order mark before the value is tolerated, as RFC 8259 section 8.1 allows.
  CHECK(boxcar::canonicalize_text("\xef\xbb\xbf{\"a\":1}") == R"({"a":1})");
}

TEST_CASE("A NUL byte in JSON text is a parse error, not the end of the input", "[canonical_json][parse]") {
  // nlohmann's lexer reads NUL between tokens as the end; "2\0...2" used to canonicalise as 2.
  using namespace std::string_literals;
  for (const std::string& text : {"2\0 2"s, "{\"a\":1}\0{\"evil\":true}"s, "[1]\0"s, "\0"s, " \0 1"s}) {
    INFO("text of " << text.size() << " bytes");
    CHECK(text_failure(text).code == "JSON_PARSE_ERROR");
  }
  CHECK(text_failure("\xff\0"s).code == "JSON_INVALID_UTF8");
}

TEST_CASE("JSON Pointer paths escape tilde and slash", "[canonical_json]") {
  json value = json::object();
  value["a/b"]["m~n"] = std::numeric_limits<double>::infinity();
  const Failure failure = canonicalize_failure(value);
  CHECK(failure.code == "JSON_NON_FINITE_NUMBER");
  CHECK(failure.path == "/a~1b/m~0n");

  try {
    (void)boxcar::canonicalize(value);
    FAIL("expected JsonValueError");
  } catch (const boxcar::Error& e) {
    CHECK(std::string(e.what()).find("/a~1b/m~0n") != std::string::npos);
  }
}

TEST_CASE("Canonical output is a fixed point of canonicalize_text", "[canonical_json]") {
  const std::string once = boxcar::canonicalize_text(
      R"({"z":[1.50,-0,1e-7,"\u00e9"],"a":{"\ud83d\ude00":true,"\uffff":null},"m":"\u001f"})");
  CHECK(boxcar::canonicalize_text(once) == once);
  CHECK(boxcar::canonicalize(json::parse(once)) == once);
}

TEST_CASE("sha256_hex matches the FIPS 180-2 test vectors", "[sha256]") {
  CHECK(boxcar::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(boxcar::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(boxcar::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(boxcar::sha256_hex(std::string(1'000'000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("content_fingerprint hashes the JCS envelope of type, version and payload", "[fingerprint]") {
  const std::string payload = boxcar::canonicalize_text(R"({"id": 7, "amount": 12.50})");
  REQUIRE(payload == R"({"amount":12.5,"id":7})");

  const std::string envelope = R"({"eventType":"order.created","payload":{"amount":12.5,"id":7},"schemaVersion":2})";
  const std::string fingerprint = boxcar::content_fingerprint("order.created", 2, payload);
  CHECK(fingerprint == boxcar::sha256_hex(envelope));
  // printf '%s' '<envelope>' | sha256sum
  CHECK(fingerprint == "db3667e9d6c25f150f8a86026dbf86d9f8ecc5225eb016fe758fe7188b751299");

  // The envelope is itself the canonical form of the equivalent JSON object.
  const json as_object = {{"schemaVersion", 2}, {"payload", json::parse(payload)}, {"eventType", "order.created"}};
  CHECK(boxcar::canonicalize(as_object) == envelope);

  // Every input participates.
  CHECK(boxcar::content_fingerprint("order.created", 3, payload) != fingerprint);
  CHECK(boxcar::content_fingerprint("order.updated", 2, payload) != fingerprint);
  CHECK(boxcar::content_fingerprint("order.created", 2, R"({"amount":12.5,"id":8})") != fingerprint);
}

TEST_CASE("content_fingerprint escapes the event type as a JCS string", "[fingerprint]") {
  const std::string event_type = "we\"ird\\type\n\xc3\xa9";
  CHECK(boxcar::content_fingerprint(event_type, -1, "[]") ==
        boxcar::sha256_hex("{\"eventType\":\"we\\\"ird\\\\type\\n\xc3\xa9\",\"payload\":[],"
                           "\"schemaVersion\":-1}"));

  Failure failure = failure_of([] { (void)boxcar::content_fingerprint("bad\xff", 1, "{}"); });
  CHECK(failure.code == "JSON_INVALID_UTF8");
  CHECK(failure.path == "/eventType");

  failure = failure_of([] { (void)boxcar::content_fingerprint(std::string_view("a\0b", 3), 1, "{}"); });
  CHECK(failure.code == "JSON_NUL_CHARACTER");
  CHECK(failure.path == "/eventType");
}
