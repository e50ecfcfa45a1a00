// PostgreSQL array literals ("{1,2,3}", "{\"a\",\"b\"}") for the one-parameter batch
// statements (`WHERE id = ANY($1::bigint[])`, `unnest($1::text[])`): one helper instead
// of a hand-rolled loop in every component. Internal to Boxcar's libraries.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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

/// "{1,2,3}" ("{}" when empty): for a `$n::bigint[]` parameter.
std::string pg_array(std::span<const std::int64_t> values);
/// "{\"a\",\"b\"}": for a `$n::text[]` (or `::uuid[]`) parameter.
std::string pg_array(std::span<const std::string> values);

}  // namespace boxcar::detail
