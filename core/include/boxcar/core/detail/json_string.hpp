// What RFC 8785 writes as a JSON string's body unchanged: shared by the canonical writer
// and callers that write small, known-shape JSON directly (the inbox's metadata).
#pragma once

#include <string_view>

namespace boxcar::detail {

/// A byte a JSON string escapes: the quote, the backslash and the controls below U+0020.
constexpr bool json_escapes(unsigned char byte) noexcept { return byte < 0x20 || byte == '"' || byte == '\\'; }

/// True when canonicalize() writes `text`, as a JSON string, as itself between quotes:
/// valid UTF-8 with no byte to escape (U+0000 included).
bool is_plain_json_string(std::string_view text) noexcept;

}  // namespace boxcar::detail
