// Bounding of stored error text (last_error columns): valid UTF-8, no U+0000, a visible
// truncation marker.
#include "boxcar/inbox/detail/error_text.hpp"

#include <algorithm>

#include "boxcar/core/canonical_json.hpp"

namespace boxcar::detail {

std::string bounded_error_text(const std::string& text, std::size_t max_bytes) {
  std::string clean;
  clean.reserve(std::min(text.size(), max_bytes + 32));
  std::size_t i = 0;
  while (i < text.size() && clean.size() < max_bytes) {
    const auto c = static_cast<unsigned char>(text[i]);
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > text.size() || !is_valid_utf8(std::string_view(text).substr(i, len)) || c == 0) {
      clean += '?';
      ++i;
      continue;
    }
    if (clean.size() + len > max_bytes) break;
    clean.append(text, i, len);
    i += len;
  }
  if (i < text.size()) clean += "…[truncated " + std::to_string(text.size() - i) + " bytes]";
  return clean;
}

}  // namespace boxcar::detail
