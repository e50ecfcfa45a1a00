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

void PgArrayBuilder::add_null() {
  separate();
  text_ += "NULL";
}

void PgArrayBuilder::add(std::string_view value) {
  separate();
  text_ += '"';
  // The text between two escapes is appended whole, not byte by byte: payloads are long.
  while (!value.empty()) {
    const std::size_t run = value.find_first_of("\"\\");
    text_.append(value.substr(0, run));
    if (run == std::string_view::npos) break;
    text_ += '\\';
    text_ += value[run];
    value.remove_prefix(run + 1);
  }
  text_ += '"';
}

void PgArrayBuilder::reserve(std::size_t bytes) { text_.reserve(bytes); }

std::size_t PgArrayBuilder::element_bytes(std::string_view value) {
  std::size_t bytes = value.size() + 3;  // the quotes and one separator
  for (const char c : value)
    if (c == '"' || c == '\\') ++bytes;
  return bytes;
}

std::string PgArrayBuilder::finish() && {
  text_ += '}';
  return std::move(text_);
}

}  // namespace boxcar::detail

namespace boxcar {

using detail::PgArrayBuilder;

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

}  // namespace boxcar
