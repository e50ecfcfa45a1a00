// PostgreSQL array literal building (quoting rules: "Array Value Input" in the manual).
#include "boxcar/core/detail/pg_array.hpp"

namespace boxcar::detail {

void PgArrayBuilder::separate() {
  if (text_.size() > 1) text_ += ',';
}

void PgArrayBuilder::add(std::int64_t value) {
  separate();
  text_ += std::to_string(value);
}

void PgArrayBuilder::add(std::string_view value) {
  separate();
  text_ += '"';
  for (const char c : value) {
    if (c == '"' || c == '\\') text_ += '\\';
    text_ += c;
  }
  text_ += '"';
}

std::string PgArrayBuilder::finish() && {
  text_ += '}';
  return std::move(text_);
}

std::string pg_array(std::span<const std::int64_t> values) {
  PgArrayBuilder array;
  for (const auto value : values) array.add(value);
  return std::move(array).finish();
}

std::string pg_array(std::span<const std::string> values) {
  PgArrayBuilder array;
  for (const auto& value : values) array.add(std::string_view(value));
  return std::move(array).finish();
}

}  // namespace boxcar::detail
