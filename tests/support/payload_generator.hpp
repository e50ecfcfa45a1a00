// Deterministic generator of JSON payloads that stress canonicalisation and storage:
// numbers of every magnitude (subnormals, the 2^53 and 1e21 boundaries of the number
// rule, negative zero, powers of ten, int64/uint64 extremes), strings and member names
// mixing ASCII, C0 controls, quotes, BMP, private-use and non-BMP characters, and
// nesting up to a given depth. The same seed gives the same payloads on every machine.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

namespace boxcar::testing {

class PayloadGenerator {
 public:
  /// `max_depth` is the deepest nesting produced, the root object counting as 1.
  PayloadGenerator(std::uint64_t seed, std::size_t max_depth) : random_(seed), max_depth_(max_depth) {}

  /// An object payload. About one payload in twenty is a chain nested exactly
  /// max_depth deep; the rest are shallow and wide.
  nlohmann::json payload() {
    nlohmann::json root = nlohmann::json::object();
    if (below(20) == 0) {
      nlohmann::json* cursor = &root;
      for (std::size_t depth = 2; depth <= max_depth_; ++depth) {
        nlohmann::json* slot = nullptr;
        if (cursor->is_object()) {
          slot = &(*cursor)[text(3)];
        } else {
          cursor->push_back(number());
          cursor->push_back(nullptr);
          slot = &cursor->back();
        }
        *slot = below(2) == 0 ? nlohmann::json::object() : nlohmann::json::array();
        cursor = slot;
      }
      if (cursor->is_object()) {
        (*cursor)[text(4)] = number();
      } else {
        cursor->push_back(number());
      }
      return root;
    }
    const std::size_t members = 1 + below(8);
    for (std::size_t i = 0; i < members; ++i) root[text(6)] = value(2);
    return root;
  }

  /// A finite number, as a double or a 64-bit integer. A few per hundred lie in the
  /// band the number rule refuses, so a batch exercises both outcomes.
  nlohmann::json number() {
    switch (below(14)) {
      case 0:  // any finite double: every exponent, subnormals included
        for (;;) {
          const double d = std::bit_cast<double>(random_());
          if (std::isfinite(d)) return d;
        }
      case 1:
        return static_cast<std::int64_t>(below(2001)) - 1000;
      case 2: {  // integers at the 2^53 boundary (2^53 itself is refused), as int64 or uint64
        const std::int64_t n = (std::int64_t{1} << 53) - 2 + static_cast<std::int64_t>(below(3));
        if (below(3) == 0) return static_cast<std::uint64_t>(n);
        return below(2) == 0 ? n : -n;
      }
      case 3: {  // doubles at the 2^53 and 1e21 boundaries
        const double anchors[] = {
            9007199254740991.0, 9007199254740990.0, 4503599627370495.5, 1e21, std::nextafter(1e21, 1e300), 1.5e21};
        const double d = anchors[below(std::size(anchors))];
        return below(2) == 0 ? d : -d;
      }
      case 4: {  // 10^e over the whole double range, via the correctly rounded strtod
        const int exponent = static_cast<int>(below(634)) - 325;  // 1e-325 rounds to 0
        const std::string literal = "1e" + std::to_string(exponent);
        const double d = std::strtod(literal.c_str(), nullptr);
        return below(2) == 0 ? d : -d;
      }
      case 5: {  // 1..17 random significant digits times 10^e
        std::string literal = std::to_string(1 + below(9)) + ".";
        for (std::size_t k = below(17); k > 0; --k) literal += std::to_string(below(10));
        literal += "e" + std::to_string(static_cast<int>(below(80)) - 40);
        const double d = std::strtod(literal.c_str(), nullptr);
        return below(2) == 0 ? d : -d;
      }
      case 6:
        return -0.0;
      case 7: {  // subnormal doubles
        const std::uint64_t bits = random_() & 0x800FFFFFFFFFFFFF;
        return std::bit_cast<double>(bits);
      }
      case 8:
        return static_cast<double>(static_cast<std::int64_t>(random_() % 2000001) - 1000000) / 100.0;
      case 9:
        return std::numeric_limits<double>::min() * static_cast<double>(1 + below(4));
      case 10:
        return below(2) == 0 ? std::numeric_limits<double>::max() : std::numeric_limits<double>::lowest();
      case 11:
        return static_cast<std::int64_t>(random_() % 9007199254740991) * (below(2) == 0 ? 1 : -1);
      case 12:
        return std::ldexp(static_cast<double>(1 + below(1000)), static_cast<int>(below(40)) - 20);
      default: {  // the refused band, rarely: 1e17, 2^60, int64/uint64 extremes
        if (below(6) != 0) return 0.25;
        const nlohmann::json refused[] = {1e17,
                                          std::uint64_t{100000000000000000},
                                          1152921504606846976.0,
                                          std::numeric_limits<std::int64_t>::min(),
                                          std::numeric_limits<std::uint64_t>::max(),
                                          9.99e20};
        return refused[below(std::size(refused))];
      }
    }
  }

  /// A string of up to `max_length` code points drawn from every class that encoders
  /// and jsonb treat differently.
  std::string text(std::size_t max_length) {
    static constexpr char32_t kSpecial[] = {
        U'"',      U'\\',     U'/',      U'\x01',   U'\b',         U'\t',         U'\n',         U'\f',
        U'\r',     U'\x1f',   U'\x7f',   U'\u00e9', U'\u0416',     U'\u4e2d',     U'\u2028',     U'\u2029',
        U'\ufeff', U'\ue000', U'\ufffd', U'\uffff', U'\U0001f600', U'\U00010000', U'\U0010ffff', U'\U0001d11e'};
    std::string out;
    for (std::size_t n = below(max_length + 1); n > 0; --n) {
      const char32_t cp =
          below(2) == 0 ? static_cast<char32_t>(U'a' + below(26)) : kSpecial[below(std::size(kSpecial))];
      append_utf8(out, cp);
    }
    return out;
  }

 private:
  std::uint64_t below(std::uint64_t bound) { return random_() % bound; }

  nlohmann::json value(std::size_t depth) {
    const std::uint64_t kind = depth < 5 ? below(9) : below(6);
    switch (kind) {
      case 0:
        return nullptr;
      case 1:
        return below(2) == 0;
      case 2:
      case 3:
        return text(8);
      case 4:
      case 5:
        return number();
      case 6: {
        nlohmann::json array = nlohmann::json::array();
        for (std::size_t n = below(5); n > 0; --n) array.push_back(value(depth + 1));
        return array;
      }
      default: {
        nlohmann::json object = nlohmann::json::object();
        for (std::size_t n = below(5); n > 0; --n) object[text(5)] = value(depth + 1);
        return object;
      }
    }
  }

  static void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  std::mt19937_64 random_;
  std::size_t max_depth_;
};

}  // namespace boxcar::testing
