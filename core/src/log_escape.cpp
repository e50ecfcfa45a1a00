// The escaping rules of log_fields.hpp: one scanner classifies each character, three
// renderings differ only in what they do with quotes, backslashes and plain text.
#include <cstdint>

#include "boxcar/core/detail/log_fields.hpp"

namespace boxcar::detail {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// One step of the scan: `length` bytes at the position; `code_point` if they are
// well-formed UTF-8, else -1 (one stray byte).
struct Step {
  std::size_t length;
  std::int32_t code_point;
};

Step next(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {1, lead};
  std::size_t length = 0;
  std::int32_t cp = 0;
  unsigned char low = 0x80, high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2, cp = lead & 0x1F;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3, cp = lead & 0x0F;
    if (lead == 0xE0) low = 0xA0;
    if (lead == 0xED) high = 0x9F;  // no UTF-16 surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4, cp = lead & 0x07;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;
  } else {
    return {1, -1};
  }
  if (i + length > text.size()) return {1, -1};
  for (std::size_t k = 1; k < length; ++k) {
    const unsigned char b = byte(i + k);
    if (k == 1 ? (b < low || b > high) : (b < 0x80 || b > 0xBF)) return {1, -1};
    cp = (cp << 6) | (b & 0x3F);
  }
  return {length, cp};
}

bool must_escape(std::int32_t cp) {
  return cp < 0 || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp <= 0x9F) || cp == 0x2028 || cp == 0x2029;
}

// Appends the escape for a character must_escape() selected. `json` picks \u00XX over
// the \xNN that text lines use for ASCII controls; a stray byte is \xNN in both (JSON
// cannot carry it: there it is the six characters \\xNN, readable and unambiguous).
void append_escape(std::string& out, std::int32_t cp, unsigned char raw, bool json) {
  switch (cp) {
    case '\n':
      out += "\\n";
      return;
    case '\r':
      out += "\\r";
      return;
    case '\t':
      out += "\\t";
      return;
    default:
      break;
  }
  if (cp < 0) {
    out += json ? "\\\\x" : "\\x";
    out += kHex[raw >> 4];
    out += kHex[raw & 0xF];
  } else if (!json && cp < 0x80) {
    out += "\\x";
    out += kHex[cp >> 4];
    out += kHex[cp & 0xF];
  } else {
    out += "\\u";
    for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(cp >> shift) & 0xF];
  }
}

enum class Style { Text, TextField, Json };

std::string render(std::string_view text, Style style) {
  std::string out;
  out.reserve(text.size() + 2);
  for (std::size_t i = 0; i < text.size();) {
    const Step step = next(text, i);
    if (must_escape(step.code_point)) {
      append_escape(out, step.code_point, static_cast<unsigned char>(text[i]), style == Style::Json);
    } else if (style != Style::Text && (text[i] == '"' || text[i] == '\\')) {
      out += '\\';
      out += text[i];
    } else {
      out.append(text.substr(i, step.length));
    }
    i += step.length;
  }
  return out;
}

bool plain_text_field(std::string_view value) {
  if (value.empty()) return false;
  for (std::size_t i = 0; i < value.size();) {
    const Step step = next(value, i);
    if (must_escape(step.code_point)) return false;
    const char c = value[i];
    if (c == ' ' || c == '=' || c == '"' || c == '\\') return false;
    i += step.length;
  }
  return true;
}

}  // namespace

std::string escape_text_field(std::string_view value) {
  if (plain_text_field(value)) return std::string(value);
  return '"' + render(value, Style::TextField) + '"';
}

std::string escape_control_characters(std::string_view text) { return render(text, Style::Text); }

std::string json_escaped(std::string_view text) { return render(text, Style::Json); }

}  // namespace boxcar::detail
