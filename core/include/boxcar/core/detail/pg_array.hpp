// PgArrayBuilder: the element-by-element form of boxcar::pg_array (boxcar/core/pg_array.hpp),
// for Boxcar's own batch statements whose values sit inside other structs. Internal to
// Boxcar's libraries.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "boxcar/core/pg_array.hpp"

namespace boxcar::detail {

/// Builds one array literal element by element, for callers whose values sit inside
/// other structs (claimed receipts, in-flight events).
class PgArrayBuilder {
 public:
  PgArrayBuilder() : text_("{") {}
  void add(std::int64_t value);
  /// Always double-quoted, with '"' and '\' backslash-escaped, so commas, braces,
  /// blanks, empty strings and the word NULL arrive as the text they are.
  void add(std::string_view value);
  /// An SQL NULL element (unquoted NULL; add(std::string_view) quotes the word).
  void add_null();
  /// Room for `bytes` of literal, to grow the text once.
  void reserve(std::size_t bytes);
  /// What add(value) appends at most: the escaped text, its quotes and a separator.
  static std::size_t element_bytes(std::string_view value);
  /// The literal; the builder is spent afterwards.
  std::string finish() &&;

 private:
  void separate();
  std::string text_;
};

}  // namespace boxcar::detail
