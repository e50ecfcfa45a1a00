// Replacing every occurrence of a marker in text: the SQL templates' `{schema}` and
// `{role}` placeholders (with_schema, apply_roles) and the secrets redaction masks.
#pragma once

#include <string>
#include <string_view>

namespace boxcar::detail {

/// Replaces each non-overlapping `needle` in `text` with `with`, left to right; text
/// inserted by a replacement is never searched again. An empty needle changes nothing.
inline void replace_all(std::string& text, std::string_view needle, std::string_view with) {
  if (needle.empty()) return;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + with.size()))
    text.replace(pos, needle.size(), with);
}

}  // namespace boxcar::detail
