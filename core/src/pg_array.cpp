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
  // (A plain loop: string_view::find_first_of("\"\\") calls memchr once per byte.)
  const char* run = value.data();
  const char* const end = run + value.size();
  for (const char* c = run; c != end; ++c) {
    if (*c != '"' && *c != '\\') continue;
    text_.append(run, c);
    text_ += '\\';
    text_ += *c;
    run = c + 1;
  }
  text_.append(run, end);
  text_ += '"';
}

void PgArrayBuilder::reserve(std::size_t bytes) { text_.reserve(bytes); }

std::size_t PgArrayBuilder::element_bytes(std::string_view value) {
  std::size_t escapes = 0;
  // Branch-free, so the compiler can count many bytes at a time.
  for (const char c : value) escapes += static_cast<std::size_t>((c == '"') | (c == '\\'));
  return value.size() + 3 + escapes;  // the quotes and one separator
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
