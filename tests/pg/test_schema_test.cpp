// The test kit's schemas copied from a template database (TestSchemaOptions::from_template):
// the same catalog as a migration from nothing makes, and a database of their own.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <string>

#include <pqxx/pqxx>

#include "boxcar/core/migrate.hpp"
#include "child_process.hpp"
#include "test_database.hpp"

using boxcar::testing::database_url;
using boxcar::testing::kFromTemplate;
using boxcar::testing::kMigrated;
using boxcar::testing::TestDatabase;

namespace {

// `text` with every `from` replaced by `to`.
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// pg_dump's definition of every object in the schema, with the schema's name as {schema}:
// tables, partitions, columns and defaults, indexes, constraints, triggers, functions with
// their pinned search_path, views, sequences, grants and comments. The \restrict lines
// carry a random key per run.
std::string definitions(const TestDatabase& db) {
  const auto dump = boxcar::testing::run_process(
      "/usr/bin/env", {"pg_dump", "--schema-only", "--no-owner", "--schema=" + db.schema(), "--dbname=" + db.url()},
      {});
  INFO(dump.output);
  REQUIRE(dump.exit_code == 0);
  std::string kept;
  std::size_t line_start = 0;
  while (line_start < dump.output.size()) {
    auto line_end = dump.output.find('\n', line_start);
    if (line_end == std::string::npos) line_end = dump.output.size();
    const std::string line = dump.output.substr(line_start, line_end - line_start);
    if (line.rfind("\\restrict", 0) != 0 && line.rfind("\\unrestrict", 0) != 0) kept += line + "\n";
    line_start = line_end + 1;
  }
  return replace_all(kept, db.schema(), "{schema}");
}

// What the migrations leave in rows: the migration records (but when they ran) and the
// sequences' positions.
std::string rows(const TestDatabase& db) {
  std::string out;
  for (const auto& row :
       db.query("SELECT version::text || ' ' || name || ' ' || checksum || ' ' || compatible_with::text "
                "FROM {schema}.schema_migrations ORDER BY version "))
    out += row[0].as<std::string>() + "\n";
  for (const auto& row : db.query("SELECT sequencename || ' ' || coalesce(last_value::text, 'null') "
                                  "FROM pg_sequences WHERE schemaname = '" +
                                  db.schema() + "' ORDER BY sequencename"))
    out += row[0].as<std::string>() + "\n";
  return out;
}

// "" when `actual` is `expected`, else the first line where they differ, numbered. Up to
// that line both texts are the same, so one offset walks both.
std::string first_difference(const std::string& expected, const std::string& actual) {
  std::size_t line = 1, at = 0;
  while (at < expected.size() || at < actual.size()) {
    const auto expected_end = std::min(expected.find('\n', at), expected.size());
    const auto actual_end = std::min(actual.find('\n', at), actual.size());
    const std::string want = at < expected.size() ? expected.substr(at, expected_end - at) : "(end)";
    const std::string got = at < actual.size() ? actual.substr(at, actual_end - at) : "(end)";
    if (want != got) return "line " + std::to_string(line) + ": expected `" + want + "`, got `" + got + "`";
    at = expected_end + 1;
    ++line;
  }
  return "";
}

std::int64_t databases_named(const std::string& name) {
  pqxx::connection c(database_url());
  return pqxx::nontransaction(c)
      .exec_params1("SELECT count(*) FROM pg_database WHERE datname = $1", name)[0]
      .as<std::int64_t>();
}

}  // namespace

TEST_CASE("a schema copied from the template database has the catalog and rows a migration from nothing makes") {
  TestDatabase migrated(kMigrated);
  TestDatabase copied(kFromTemplate);
  const std::string expected = definitions(migrated);
  REQUIRE(expected.find("CREATE TABLE {schema}.inbox_receipts") != std::string::npos);
  REQUIRE(expected.find("SET search_path TO") != std::string::npos);
  CHECK(first_difference(expected, definitions(copied)) == "");
  CHECK(first_difference(rows(migrated), rows(copied)) == "");
  CHECK(boxcar::applied_migration_version(copied.url(), {.schema = copied.schema()}) ==
        boxcar::latest_migration_version());
}

TEST_CASE("each schema copied from the template is in a database of its own, dropped with it") {
  std::string first_name;
  {
    TestDatabase first;
    TestDatabase second;
    first_name = first.schema();
    CHECK(first.url() != database_url());
    CHECK(first.url() != second.url());
    CHECK(first.scalar("SELECT count(*) FROM pg_namespace WHERE nspname = current_database()") == 1);
    first.execute(
        "INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, "
        "schema_version, payload, fingerprint) VALUES ('global', 's', 'c', 'm', 'e', 1, '{}', repeat('a', 64))");
    CHECK(first.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);
    CHECK(second.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 0);
    CHECK(databases_named(first_name) == 1);
  }
  CHECK(databases_named(first_name) == 0);
}

TEST_CASE("a session still open in a copied database does not keep it from being dropped") {
  std::string name;
  auto db = std::make_unique<TestDatabase>();
  name = db->schema();
  pqxx::connection left_open(db->url());
  db.reset();
  CHECK(databases_named(name) == 0);
}

TEST_CASE("a keyword/value connection string reaches the copy of the template") {
  pqxx::connection c(database_url());
  const auto server = pqxx::nontransaction(c).exec1(
      "SELECT host(inet_server_addr()) AS host, inet_server_port() AS port, current_user AS name, "
      "current_database() AS dbname");
  const std::string keywords =
      "host=" + server["host"].as<std::string>() + " port=" + server["port"].as<std::string>() +
      " user=" + server["name"].as<std::string>() + " dbname=" + server["dbname"].as<std::string>();
  boxcar::testing::TestSchema db(keywords, kFromTemplate);
  CHECK(db.url() != keywords);
  CHECK(db.count("SELECT count(*) FROM pg_namespace WHERE nspname = current_database() AND nspname = '" + db.schema() +
                 "'") == 1);
}
