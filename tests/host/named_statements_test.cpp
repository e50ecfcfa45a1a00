// Every named SQL statement of every component prepares against a freshly migrated
// schema: the stand-in for sqlc, so a misspelt table, column or function fails here, in
// CI, naming the statement, instead of in production. Each library lists its statements
// with boxcar::detail::<part>_statements(); this test includes nothing from their src/.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "every_named_statement.hpp"
#include "test_database.hpp"

using boxcar::detail::NamedStatement;
using boxcar::testing::TestDatabase;

namespace {

std::vector<NamedStatement> every_statement() { return boxcar::testing::every_named_statement(); }

struct PrepareFailure {
  std::string name;
  std::string error;
};

// PREPAREs every statement, `{schema}` bound to the test schema, on one connection;
// returns the statements PostgreSQL rejected and why.
std::vector<PrepareFailure> prepare_all(const TestDatabase& db, const std::vector<NamedStatement>& statements) {
  auto connection = db.connect();
  std::vector<PrepareFailure> failures;
  for (const auto& statement : statements) {
    const std::string name(statement.name);
    try {
      connection.prepare(name, boxcar::detail::with_schema(statement.sql, db.schema()));
      connection.prepare_now(name);
    } catch (const std::exception& e) {
      failures.push_back({name, e.what()});
    }
  }
  return failures;
}

}  // namespace

TEST_CASE("every named statement of every component prepares against a migrated schema", "[statements]") {
  TestDatabase db;
  const auto statements = every_statement();
  const auto failures = prepare_all(db, statements);
  for (const auto& failure : failures) FAIL_CHECK(failure.name << " does not prepare: " << failure.error);
  CHECK(failures.empty());
}

TEST_CASE("a statement with a misspelt column fails to prepare and the failure names it", "[statements]") {
  TestDatabase db;
  const std::vector<NamedStatement> statements = {
      {"good.lookup", "SELECT id, status FROM {schema}.inbox_receipts WHERE id = $1"},
      {"typo.lookup", "SELECT id, statuz FROM {schema}.inbox_receipts WHERE id = $1"}};
  const auto failures = prepare_all(db, statements);
  REQUIRE(failures.size() == 1);
  CHECK(failures[0].name == "typo.lookup");
  CHECK(failures[0].error.find("statuz") != std::string::npos);
}

TEST_CASE("every component lists its statements under unique names", "[statements]") {
  for (const auto& part :
       {boxcar::detail::core_statements(), boxcar::detail::inbox_statements(), boxcar::detail::outbox_statements(),
        boxcar::detail::publisher_statements(), boxcar::detail::ops_statements(), boxcar::detail::testing_statements()})
    CHECK_FALSE(part.empty());
  std::set<std::string_view> names;
  for (const auto& statement : every_statement()) {
    INFO(statement.name);
    CHECK(names.insert(statement.name).second);
    CHECK_FALSE(statement.sql.empty());
  }
}
