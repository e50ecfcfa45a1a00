// PostgreSQL array literals: what the batch statements receive as one parameter.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "boxcar/core/detail/pg_array.hpp"

using boxcar::pg_array;
using boxcar::detail::PgArrayBuilder;

TEST_CASE("an empty array literal is a pair of braces") {
  CHECK(pg_array(std::vector<std::int64_t>{}) == "{}");
  CHECK(pg_array(std::vector<std::string>{}) == "{}");
}

TEST_CASE("integer elements are written bare, comma separated, negatives and extremes included") {
  CHECK(pg_array(std::vector<std::int64_t>{1, 2, 3}) == "{1,2,3}");
  CHECK(pg_array(std::vector<std::int64_t>{-5, INT64_MAX}) == "{-5,9223372036854775807}");
}

TEST_CASE("text elements are always quoted, so commas, braces, blanks, empty strings and NULL stay text") {
  CHECK(pg_array(std::vector<std::string>{"a,b", "{c}", " d ", "", "NULL"}) == R"({"a,b","{c}"," d ","","NULL"})");
}

TEST_CASE("double quotes and backslashes inside text elements are backslash-escaped") {
  CHECK(pg_array(std::vector<std::string>{R"(say "hi")", R"(C:\dir\)"}) == R"({"say \"hi\"","C:\\dir\\"})");
}

TEST_CASE("the builder takes elements one by one, of either kind") {
  PgArrayBuilder array;
  array.add(std::int64_t{7});
  array.add(std::string_view("x\"y"));
  CHECK(std::move(array).finish() == R"({7,"x\"y"})");
}

TEST_CASE("escapes at the start, the end and side by side are each escaped once, the text between kept whole") {
  CHECK(pg_array(std::vector<std::string>{"\"", "\\\\", "\"a\\b\"", "ab\"\"cd"}) ==
        R"({"\"","\\\\","\"a\\b\"","ab\"\"cd"})");
}

TEST_CASE("element_bytes is what one more text element adds to a literal, so a byte budget is never exceeded") {
  for (const std::string value : {"", "plain", "q\"uote", "back\\slash", "\"\\\"", "ünïcode €", "{a,b}"}) {
    INFO(value);
    PgArrayBuilder one;
    one.add(std::string_view("first"));
    PgArrayBuilder two = one;
    two.add(std::string_view(value));
    CHECK(std::move(two).finish().size() - std::move(one).finish().size() == PgArrayBuilder::element_bytes(value));
  }
}
