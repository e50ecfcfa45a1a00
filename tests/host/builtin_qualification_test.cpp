// Static guard for search_path hijacking (CVE-2018-1058 class, docs/security.md section 1):
// every function call in every statement Boxcar runs is qualified, with pg_catalog for a
// built-in or with Boxcar's `{schema}` for its own objects, or is SQL grammar that only
// looks like a call. An unqualified `now()` fails here, naming the statement, before the
// attack test (search_path_hijack_test.cpp) would have to find it at run time.
// Needs no database.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "every_named_statement.hpp"
#include "sql_function_calls.hpp"

using boxcar::detail::NamedStatement;
using boxcar::testing::resolves_without_search_path;
using boxcar::testing::sql_calls;

namespace {

// What Boxcar prepares, and the DDL and session-reset SQL it runs unprepared.
std::vector<NamedStatement> every_statement() {
  auto all = boxcar::testing::every_named_statement();
  const auto unprepared = boxcar::detail::core_unprepared_statements();
  all.insert(all.end(), unprepared.begin(), unprepared.end());
  return all;
}

// "<statement>: <call>(" for every call that would be resolved through the search_path.
std::vector<std::string> unqualified_calls(const std::vector<NamedStatement>& statements) {
  std::vector<std::string> found;
  for (const auto& statement : statements)
    for (const auto& call : sql_calls(statement.sql))
      if (!resolves_without_search_path(call)) found.push_back(std::string(statement.name) + ": " + call.name + "(");
  return found;
}

}  // namespace

TEST_CASE("every function Boxcar's statements call is qualified with pg_catalog or Boxcar's schema",
          "[statements][search_path]") {
  const auto statements = every_statement();
  REQUIRE(statements.size() > 50);
  const auto found = unqualified_calls(statements);
  for (const auto& call : found) FAIL_CHECK("resolved through the search_path: " << call);
  CHECK(found.empty());
}

TEST_CASE("the qualification check reports unqualified calls and accepts qualified calls and grammar",
          "[statements][search_path]") {
  const std::vector<NamedStatement> bad = {
      {"a", "SELECT now()"},
      {"b", "UPDATE {schema}.t SET at = now () + pg_catalog.make_interval(secs => 1)"},
      {"c", "SELECT \"now\"() -- pg_catalog.now()"},
      {"d", "SELECT x FROM unnest($1::text[]) AS x"},
      {"e", "SELECT public.unnest($1::text[])"},
      {"f", "SELECT count(*) FILTER (WHERE true) FROM {schema}.t"}};
  CHECK(unqualified_calls(bad) ==
        std::vector<std::string>{"a: now(", "b: now(", "c: now(", "d: unnest(", "e: public.unnest(", "f: count("});

  const std::vector<NamedStatement> good = {
      {"g", "SELECT pg_catalog.now(), 'now()', $$ now() $$ -- now()"},
      {"h", "INSERT INTO {schema}.t (a, b) VALUES ($1, COALESCE($2, ''))"},
      {"i", "WITH due AS (SELECT id FROM {schema}.t WHERE id IN (1, 2) AND EXISTS (SELECT 1)) SELECT 1"},
      {"j", "SELECT * FROM ROWS FROM (pg_catalog.unnest($1::bigint[])) AS c(id)"},
      {"k",
       "SELECT GREATEST(1, 2), least(3, 4), NULLIF(1, 2), EXTRACT(epoch FROM pg_catalog.now()), "
       "CAST(1 AS text), 1 = ANY ($1::int[]), pg_catalog.count(*) FILTER (WHERE true) OVER (PARTITION BY 1)"},
      {"l", "SELECT /* now() */ {schema}.failure_fingerprint('a', 'b')"},
      {"m", "SELECT s.x FROM {schema}.t LEFT JOIN LATERAL (SELECT 1 AS x OFFSET 0) AS s ON true"}};
  CHECK(unqualified_calls(good).empty());
}
