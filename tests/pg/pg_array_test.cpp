// Array literals read back by PostgreSQL: the escaping is right only if the server
// parses each element to exactly the text that went in.
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "boxcar/core/detail/pg_array.hpp"
#include "test_database.hpp"

using boxcar::pg_array;

TEST_CASE("PostgreSQL reads every text element of an array literal back unchanged, quotes and backslashes included") {
  boxcar::testing::TestDatabase db;
  const std::vector<std::string> values = {"plain", "a,b",         "{braces}",   " blanks ", "",
                                           "NULL",  R"(say "hi")", R"(C:\dir\)", "\\\"",     "ünïcode"};
  auto connection = db.connect();
  pqxx::nontransaction tx(connection);
  const auto rows = tx.exec_params(
      "SELECT value, value IS NULL AS is_null FROM pg_catalog.unnest($1::text[]) WITH ORDINALITY AS a(value, n) "
      "ORDER BY n",
      pg_array(values));
  REQUIRE(rows.size() == values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    CHECK_FALSE(rows[i]["is_null"].as<bool>());
    CHECK(rows[i]["value"].as<std::string>() == values[i]);
  }
}

TEST_CASE("PostgreSQL reads an id array literal as the same bigints, and an empty one as no rows") {
  boxcar::testing::TestDatabase db;
  auto connection = db.connect();
  pqxx::nontransaction tx(connection);
  const std::vector<std::int64_t> ids = {1, -2, INT64_MAX};
  const auto rows = tx.exec_params(
      "SELECT id FROM pg_catalog.unnest($1::bigint[]) WITH ORDINALITY AS a(id, n) ORDER BY n", pg_array(ids));
  REQUIRE(rows.size() == ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) CHECK(rows[i]["id"].as<std::int64_t>() == ids[i]);
  CHECK(tx.exec_params("SELECT 1 FROM pg_catalog.unnest($1::bigint[])", pg_array(std::vector<std::int64_t>{})).empty());
}
