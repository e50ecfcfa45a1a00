// RFC 8785 (JCS) canonical serialisation of nlohmann::json values and strict parsing
// of JSON text into them, so fingerprints match those computed by other languages.
#include "boxcar/core/canonical_json.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "boxcar/core/detail/json_string.hpp"
#include "boxcar/core/error.hpp"

namespace boxcar {
namespace {

using json = nlohmann::json;

/// Appends one RFC 6901 reference token, escaping the two characters that have a
/// meaning inside a pointer.
void append_pointer_token(std::string& path, std::string_view token) {
  path.push_back('/');
  for (const char c : token) {
    if (c == '~') {
      path += "~0";
    } else if (c == '/') {
      path += "~1";
    } else {
      path.push_back(c);
    }
  }
}

void append_pointer_index(std::string& path, std::size_t index) {
  path.push_back('/');
  path += std::to_string(index);
}

/// Converts already-validated UTF-8 to UTF-16 code units, the unit JCS sorts by.
std::u16string to_utf16(std::string_view utf8) {
  std::u16string out;
  out.reserve(utf8.size());
  const auto* bytes = reinterpret_cast<const unsigned char*>(utf8.data());
  std::size_t i = 0;
  while (i < utf8.size()) {
    const unsigned char lead = bytes[i];
    char32_t cp = 0;
    std::size_t length = 1;
    if (lead < 0x80) {
      cp = lead;
    } else if (lead < 0xE0) {
      cp = lead & 0x1Fu;
      length = 2;
    } else if (lead < 0xF0) {
      cp = lead & 0x0Fu;
      length = 3;
    } else {
      cp = lead & 0x07u;
      length = 4;
    }
    for (std::size_t k = 1; k < length; ++k) {
      cp = (cp << 6) | (bytes[i + k] & 0x3Fu);
    }
    i += length;

    if (cp < 0x10000) {
      out.push_back(static_cast<char16_t>(cp));
    } else {
      cp -= 0x10000;
      out.push_back(static_cast<char16_t>(0xD800 + (cp >> 10)));
      out.push_back(static_cast<char16_t>(0xDC00 + (cp & 0x3FF)));
    }
  }
  return out;
}

/// Appends a finite double formatted exactly as ECMAScript's Number::toString (ECMA-262
/// §6.1.6.1.20), which RFC 8785 §3.2.2.3 mandates.
void append_es_number(std::string& out, double value) {
  if (value == 0.0) {
    out.push_back('0');  // covers -0, which ES prints without a sign
    return;
  }
  if (value < 0) {
    out.push_back('-');
    value = -value;
  }

  // Shortest round-trip scientific form, e.g. "1.2345e+02" or "5e-324". Among the
  // shortest candidates to_chars picks the one closest to the value, which is the
  // same tie-break ES specifies.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::scientific);
  const std::string_view sci(buffer, static_cast<std::size_t>(result.ptr - buffer));
  const std::size_t e_pos = sci.find('e');

  char digit_buffer[32];
  std::size_t k = 0;  // the number of significant digits
  for (const char c : sci.substr(0, e_pos)) {
    if (c != '.') digit_buffer[k++] = c;
  }
  const std::string_view digits(digit_buffer, k);
  std::string_view exponent_text = sci.substr(e_pos + 1);
  if (!exponent_text.empty() && exponent_text.front() == '+') {
    exponent_text.remove_prefix(1);  // from_chars does not accept a leading '+'
  }
  int exponent = 0;
  std::from_chars(exponent_text.data(), exponent_text.data() + exponent_text.size(), exponent);

  // ES terms: value = 0.d1d2...dk × 10^n, i.e. n is one more than the scientific
  // exponent and k is the number of significant digits.
  const int n = exponent + 1;
  const int ki = static_cast<int>(k);
  if (ki <= n && n <= 21) {
    out += digits;
    out.append(static_cast<std::size_t>(n - ki), '0');
  } else if (0 < n && n <= 21) {
    out += digits.substr(0, static_cast<std::size_t>(n));
    out.push_back('.');
    out += digits.substr(static_cast<std::size_t>(n));
  } else if (-6 < n && n <= 0) {
    out += "0.";
    out.append(static_cast<std::size_t>(-n), '0');
    out += digits;
  } else {
    out.push_back(digits[0]);
    if (k > 1) {
      out.push_back('.');
      out += digits.substr(1);
    }
    out.push_back('e');
    out.push_back(n - 1 < 0 ? '-' : '+');
    char exponent_digits[8];
    const auto written =
        std::to_chars(exponent_digits, exponent_digits + sizeof exponent_digits, n - 1 < 0 ? 1 - n : n - 1);
    out.append(exponent_digits, written.ptr);
  }
}

std::string es_number_text(double value) {
  std::string out;
  append_es_number(out, value);
  return out;
}

/// True for a double whose canonical form would be an integer literal beyond
/// ±kMaxSafeInteger. Every double from 2^53 on is an integer, and below
/// kMinExponentFormMagnitude ECMAScript prints it as plain digits ("100000000000000000"):
/// text that PostgreSQL, nlohmann and other 64-bit parsers read back as an exact integer
/// (often not the double's value, e.g. 2^60 prints as 1152921504606847000), which then
/// fails this very rule. From 10^21 on the form is exponential ("1e+21") and every
/// reader, including nlohmann on jsonb's digits, takes it as the same double.
bool is_ambiguous_integer(double value) {
  const double magnitude = std::fabs(value);
  return magnitude > static_cast<double>(kMaxSafeInteger) && magnitude < kMinExponentFormMagnitude;
}

/// Where the writer is: one node per enclosing container on the writer's own stack. Only
/// an error turns the chain into a JSON Pointer, so a value that is written pays nothing
/// for being able to say where it was.
struct PathNode {
  const PathNode* parent;
  const std::string* name;  // the member's name; null for an array element
  std::size_t index;        // the element's index
};

std::string pointer_of(const PathNode* at) {
  std::vector<const PathNode*> chain;
  for (const PathNode* node = at; node != nullptr; node = node->parent) chain.push_back(node);
  std::string path;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    if ((*it)->name != nullptr) {
      append_pointer_token(path, *(*it)->name);
    } else {
      append_pointer_index(path, (*it)->index);
    }
  }
  return path;
}

/// Serialises one value tree into `out_`; every error names the JSON Pointer of the
/// value it is about.
class CanonicalWriter {
 public:
  explicit CanonicalWriter(const CanonicalLimits& limits) : limits_(limits) {}

  std::string finish(const json& value) {
    write_value(value, 0, nullptr);
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const PathNode* at, const char* code, const std::string& message) const {
    throw JsonValueError(code, pointer_of(at), message);
  }

  [[noreturn]] void fail_integer_out_of_range(const PathNode* at, std::string_view number) const {
    fail(at, "JSON_INTEGER_OUT_OF_RANGE",
         "number " + std::string(number) +
             " is an integer beyond ±2^53-1 that not every reader holds exactly; send it as a string");
  }

  void check_size(const PathNode* at) const {
    if (out_.size() > limits_.max_bytes) {
      fail(at, "JSON_TOO_LARGE", "canonical JSON exceeds " + std::to_string(limits_.max_bytes) + " bytes");
    }
  }

  void append(std::string_view text, const PathNode* at) {
    out_ += text;
    check_size(at);
  }

  template <typename Integer>
  void append_integer(Integer number, const PathNode* at) {
    char digits[24];
    const auto written = std::to_chars(digits, digits + sizeof digits, number);
    const std::string_view text(digits, static_cast<std::size_t>(written.ptr - digits));
    bool out_of_range = number > static_cast<Integer>(kMaxSafeInteger);
    if constexpr (std::is_signed_v<Integer>) out_of_range = out_of_range || number < -kMaxSafeInteger;
    if (out_of_range) fail_integer_out_of_range(at, text);
    append(text, at);
  }

  /// `depth` is the number of containers enclosing `value`; `at` is where it is.
  void write_value(const json& value, std::size_t depth, const PathNode* at) {
    switch (value.type()) {
      case json::value_t::null:
        append("null", at);
        return;
      case json::value_t::boolean:
        append(value.get<bool>() ? "true" : "false", at);
        return;
      // The number rule depends on the value only: 1e17 as a double, an int64 or a
      // uint64 is refused alike (see is_ambiguous_integer).
      case json::value_t::number_integer:
        append_integer(value.get<std::int64_t>(), at);
        return;
      case json::value_t::number_unsigned:
        append_integer(value.get<std::uint64_t>(), at);
        return;
      case json::value_t::number_float: {
        const auto number = value.get<double>();
        if (!std::isfinite(number)) {
          fail(at, "JSON_NON_FINITE_NUMBER", "NaN and Infinity have no JSON representation");
        }
        if (is_ambiguous_integer(number)) {
          fail_integer_out_of_range(at, es_number_text(number));
        }
        append_es_number(out_, number);
        check_size(at);
        return;
      }
      case json::value_t::string:
        write_string(value.get_ref<const std::string&>(), at);
        return;
      case json::value_t::array:
        write_array(value, depth + 1, at);
        return;
      case json::value_t::object:
        write_object(value, depth + 1, at);
        return;
      case json::value_t::binary:
        fail(at, "JSON_UNSUPPORTED_VALUE", "binary values have no JSON text representation");
      case json::value_t::discarded:
        fail(at, "JSON_UNSUPPORTED_VALUE", "discarded values have no JSON text representation");
    }
    fail(at, "JSON_UNSUPPORTED_VALUE", "unknown JSON value type");
  }

  void check_depth(std::size_t depth, const PathNode* at) const {
    // Checked before descending so hostile nesting is refused without recursing into
    // it: max_depth is what bounds this writer's stack use.
    if (depth > limits_.max_depth) {
      fail(at, "JSON_TOO_DEEP", "nesting exceeds " + std::to_string(limits_.max_depth) + " levels");
    }
  }

  void write_array(const json& array, std::size_t depth, const PathNode* at) {
    check_depth(depth, at);
    append("[", at);
    PathNode element{at, nullptr, 0};
    for (const auto& value : array) {
      if (element.index != 0) {
        append(",", at);
      }
      write_value(value, depth, &element);
      ++element.index;
    }
    append("]", at);
  }

  void write_member(const std::string& name, const json& value, std::size_t depth, const PathNode* at, bool first) {
    if (!first) {
      append(",", at);
    }
    const PathNode member{at, &name, 0};
    write_string(name, &member);
    append(":", at);
    write_value(value, depth, &member);
  }

  void write_object(const json& object, std::size_t depth, const PathNode* at) {
    check_depth(depth, at);
    const auto& members = object.get_ref<const json::object_t&>();

    // Names are validated before sorting because the UTF-16 conversion relies on
    // well-formed input. A bad name is reported at the object's own path: a pointer
    // quoting the malformed bytes would carry them into logs and error payloads.
    //
    // UTF-8 byte order (nlohmann's) is code point order, which is UTF-16 order unless a
    // name holds a character from U+E000 (lead byte 0xEE and up): only such objects re-sort.
    bool byte_order_is_utf16_order = true;
    for (const auto& [name, value] : members) {
      if (!is_valid_utf8(name)) {
        fail(at, "JSON_INVALID_UTF8", "a member name is not valid UTF-8");
      }
      if (name.find('\0') != std::string::npos) {
        fail(at, "JSON_NUL_CHARACTER", "a member name contains U+0000");
      }
      if (std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xEE; }))
        byte_order_is_utf16_order = false;
    }

    append("{", at);
    bool first = true;
    if (byte_order_is_utf16_order) {
      for (const auto& [name, value] : members) {
        write_member(name, value, depth, at, first);
        first = false;
      }
    } else {
      struct Member {
        std::u16string sort_key;
        const std::string* name;
        const json* value;
      };
      std::vector<Member> sorted;
      sorted.reserve(members.size());
      for (const auto& [name, value] : members) sorted.push_back(Member{to_utf16(name), &name, &value});
      std::sort(sorted.begin(), sorted.end(), [](const Member& a, const Member& b) { return a.sort_key < b.sort_key; });
      for (const Member& member : sorted) {
        write_member(*member.name, *member.value, depth, at, first);
        first = false;
      }
    }
    append("}", at);
  }

  void write_string(const std::string& text, const PathNode* at) {
    if (!is_valid_utf8(text)) {
      fail(at, "JSON_INVALID_UTF8", "string is not valid UTF-8");
    }
    if (text.find('\0') != std::string::npos) {
      fail(at, "JSON_NUL_CHARACTER", "string contains U+0000");
    }
    // Escaping never shrinks text, so an oversized string is refused before copying.
    if (text.size() + 2 > limits_.max_bytes || out_.size() > limits_.max_bytes - text.size() - 2) {
      fail(at, "JSON_TOO_LARGE", "canonical JSON exceeds " + std::to_string(limits_.max_bytes) + " bytes");
    }

    static constexpr char kHexDigits[] = "0123456789abcdef";
    out_.push_back('"');
    // Runs of bytes that need no escape are appended whole.
    const char* run = text.data();
    const char* const end = run + text.size();
    for (const char* c = run; c != end; ++c) {
      const auto byte = static_cast<unsigned char>(*c);
      if (!detail::json_escapes(byte)) continue;  // RFC 8785 keeps U+007F, non-ASCII and U+2028 raw
      out_.append(run, c);
      run = c + 1;
      switch (byte) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\t':
          out_ += "\\t";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\f':
          out_ += "\\f";
          break;
        case '\r':
          out_ += "\\r";
          break;
        default:
          out_ += "\\u00";
          out_.push_back(kHexDigits[byte >> 4]);
          out_.push_back(kHexDigits[byte & 0x0F]);
      }
    }
    out_.append(run, end);
    out_.push_back('"');
    check_size(at);
  }

  const CanonicalLimits& limits_;
  std::string out_;
};

/// SAX handler that builds the DOM like nlohmann's own, but refuses duplicate member
/// names, excessive depth and numbers nlohmann would silently approximate, all with
/// the JSON Pointer of the offending value. nlohmann's parser keeps its own stack on
/// the heap, so even absurd nesting is stopped here at max_depth + 1 without deep
/// recursion. Container pointers stay valid because a parent only grows after its
/// open child has been closed.
class StrictDomBuilder {
 public:
  StrictDomBuilder(std::string_view text, const CanonicalLimits& limits) : text_(text), limits_(limits) {}

  json take_root() { return std::move(root_); }

  bool null() {
    add_value(json(nullptr));
    return true;
  }
  bool boolean(bool value) {
    add_value(json(value));
    return true;
  }
  bool number_integer(json::number_integer_t value) {
    add_value(json(value));
    return true;
  }
  bool number_unsigned(json::number_unsigned_t value) {
    add_value(json(value));
    return true;
  }
  // A literal denotes the nearest double, as in JSON.parse; the number rule is applied
  // to that value by the writer, so 1e17, 1.0e17 and 100000000000000000 fare alike.
  bool number_float(json::number_float_t value, const std::string& /*literal*/) {
    add_value(json(value));
    return true;
  }
  bool string(std::string& value) {
    add_value(json(std::move(value)));
    return true;
  }
  bool binary(json::binary_t& /*value*/) {
    add_value(json(nullptr));
    throw JsonValueError("JSON_UNSUPPORTED_VALUE", path_, "binary values have no JSON text representation");
  }

  bool start_object(std::size_t /*elements*/) {
    open_container(json::object());
    return true;
  }
  bool key(std::string& name) {
    Frame& frame = frames_.back();
    path_.resize(frame.path_size);
    append_pointer_token(path_, name);
    auto& members = frame.container->get_ref<json::object_t&>();
    if (members.find(name) != members.end()) {
      throw JsonValueError("JSON_DUPLICATE_KEY", path_, "duplicate member name");
    }
    frame.pending_member = &members[std::move(name)];
    return true;
  }
  bool end_object() {
    close_container();
    return true;
  }

  bool start_array(std::size_t /*elements*/) {
    open_container(json::array());
    return true;
  }
  bool end_array() {
    close_container();
    return true;
  }

  bool parse_error(std::size_t position, const std::string& /*last_token*/, const nlohmann::detail::exception& error) {
    const std::string path = error_path();
    // 406 is nlohmann's "number overflow": a literal such as 1e400 that no double holds.
    if (error.id == 406) {
      throw JsonValueError("JSON_NON_FINITE_NUMBER", path, "number literal overflows a double");
    }
    // The lexer reports ill-formed UTF-8 as a generic syntax error; name it properly.
    if (!is_valid_utf8(text_)) {
      throw JsonValueError("JSON_INVALID_UTF8", path, "JSON text is not valid UTF-8");
    }
    throw JsonValueError("JSON_PARSE_ERROR", path,
                         "malformed JSON near byte " + std::to_string(position) + ": " + error.what());
  }

 private:
  struct Frame {
    json* container;
    std::size_t path_size;  // length of the container's own pointer
    std::size_t next_index = 0;
    json* pending_member = nullptr;  // slot created by key(), filled by the next value
  };

  /// Stores `value` where the parser currently is and sets path_ to point at it.
  json* add_value(json&& value) {
    if (frames_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Frame& frame = frames_.back();
    if (frame.container->is_array()) {
      path_.resize(frame.path_size);
      append_pointer_index(path_, frame.next_index++);
      auto& elements = frame.container->get_ref<json::array_t&>();
      elements.push_back(std::move(value));
      return &elements.back();
    }
    json* slot = std::exchange(frame.pending_member, nullptr);
    *slot = std::move(value);
    return slot;
  }

  /// Where the parser was when it failed: the value it was reading (an array's next
  /// element, or the member whose name it has read), else the enclosing object when it
  /// failed between members (or inside a member name, which cannot be quoted).
  std::string error_path() const {
    if (frames_.empty()) {
      return {};  // the root value itself, or trailing text after it
    }
    const Frame& frame = frames_.back();
    std::string path = path_.substr(0, frame.path_size);
    if (frame.container->is_array()) {
      append_pointer_index(path, frame.next_index);
    } else if (frame.pending_member != nullptr) {
      path = path_;
    }
    return path;
  }

  void open_container(json&& empty) {
    json* container = add_value(std::move(empty));
    if (frames_.size() + 1 > limits_.max_depth) {
      throw JsonValueError("JSON_TOO_DEEP", path_, "nesting exceeds " + std::to_string(limits_.max_depth) + " levels");
    }
    frames_.push_back(Frame{container, path_.size()});
  }

  void close_container() { frames_.pop_back(); }

  std::string_view text_;
  const CanonicalLimits& limits_;
  json root_;
  std::vector<Frame> frames_;
  std::string path_;
};

}  // namespace

std::string format_es_number(double value) {
  if (!std::isfinite(value)) {
    throw JsonValueError("JSON_NON_FINITE_NUMBER", "", "NaN and Infinity have no JSON representation");
  }
  return es_number_text(value);
}

std::string canonicalize(const nlohmann::json& value, const CanonicalLimits& limits) {
  return CanonicalWriter(limits).finish(value);
}

std::string canonicalize_text(std::string_view json_text, const CanonicalLimits& limits) {
  // nlohmann's lexer reads a NUL byte between tokens as the end of the input (for C
  // strings), so "2\0<anything>" would canonicalise as 2, the rest ignored. A raw NUL is
  // never JSON text: refuse it (found by the differential fuzzer, tests/fuzz).
  if (const auto nul = json_text.find('\0'); nul != std::string_view::npos) {
    if (!is_valid_utf8(json_text)) throw JsonValueError("JSON_INVALID_UTF8", "", "JSON text is not valid UTF-8");
    throw JsonValueError("JSON_PARSE_ERROR", "",
                         "malformed JSON near byte " + std::to_string(nul) + ": a NUL byte is not JSON text");
  }
  StrictDomBuilder builder(json_text, limits);
  json::sax_parse(json_text.begin(), json_text.end(), &builder, json::input_format_t::json,
                  /*strict=*/true, /*ignore_comments=*/false);
  return canonicalize(builder.take_root(), limits);
}

namespace detail {

bool is_plain_json_string(std::string_view text) noexcept {
  return std::none_of(text.begin(), text.end(), [](char c) { return json_escapes(static_cast<unsigned char>(c)); }) &&
         is_valid_utf8(text);
}

}  // namespace detail

}  // namespace boxcar
