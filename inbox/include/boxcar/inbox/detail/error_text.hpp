// How failure text is made storable before it is written to last_error. Not public API;
// here so the unit tests can reach it.
#pragma once

#include <cstddef>
#include <string>

namespace boxcar::detail {

/// `text` made storable and bounded: invalid UTF-8 and U+0000 become '?', and anything
/// past `max_bytes` is replaced by a visible "…[truncated N bytes]" marker.
std::string bounded_error_text(const std::string& text, std::size_t max_bytes);

}  // namespace boxcar::detail
