// PostgreSQL array literals for one-parameter bulk statements: what a batch handler
// (boxcar/inbox/batch_handler.hpp) passes to `unnest($1::text[])` or `= ANY($1::bigint[])`
// through context.tx, since libpqxx 6.4 binds no arrays. Boxcar's own statements use the
// same encoder.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace boxcar {

/// "{1,2,3}" ("{}" when empty): for a `$n::bigint[]` parameter.
std::string pg_array(std::span<const std::int64_t> values);
/// "{\"a\",\"b\"}" ("{}" when empty): for a `$n::text[]` (or `::uuid[]`) parameter. Every
/// element is double-quoted with '"' and '\' backslash-escaped, so commas, braces, blanks,
/// empty strings and the word NULL arrive as the text they are.
std::string pg_array(std::span<const std::string> values);

}  // namespace boxcar
