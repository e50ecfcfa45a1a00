// The directives of migration files, and the rules every embedded migration follows so
// that upgrades stay online (docs/development.md, "Add a migration").
#include <catch2/catch.hpp>

#include <regex>
#include <set>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/detail/migration_file.hpp"
#include "boxcar/core/error.hpp"

using boxcar::MigrationError;
using boxcar::detail::embedded_migrations;
using boxcar::detail::parse_migration_file;

namespace {

std::string malformed_reason(std::string_view name, std::string_view sql) {
  try {
    parse_migration_file(name, sql);
  } catch (const MigrationError& e) {
    CHECK(e.code() == "MIGRATION_MALFORMED");
    return e.what();
  }
  FAIL("expected MIGRATION_MALFORMED for " << sql);
  return {};
}

}  // namespace

TEST_CASE("a migration file without directives runs in a transaction and needs a binary that knows it") {
  const auto m = parse_migration_file("0012_things.sql", "-- plain comment\nCREATE TABLE t (id int);\n");
  CHECK(m.version == 12);
  CHECK(m.transactional);
  CHECK(m.compatible_with == 12);
  CHECK(m.previous_checksums.empty());
  CHECK(m.concurrent_index.empty());
  CHECK(m.checksum == boxcar::sha256_hex("-- plain comment\nCREATE TABLE t (id int);\n"));
}

TEST_CASE("a no-transaction concurrent index build names its index and its compatibility") {
  const auto m = parse_migration_file("0009_idx.sql",
                                      "-- boxcar:no-transaction\n-- boxcar:compatible-with 7\n-- why\n"
                                      "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_x\n    ON t (x);\n");
  CHECK_FALSE(m.transactional);
  CHECK(m.compatible_with == 7);
  CHECK(m.concurrent_index == "t_x");
}

TEST_CASE(
    "a statements-from-query step holds one query, and each statement it generates must be an idempotent "
    "concurrent index build") {
  const auto m = parse_migration_file("0024_each.sql",
                                      "-- boxcar:no-transaction\n-- boxcar:statements-from-query\n"
                                      "SELECT format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON %I (x)', a, b)\n"
                                      "FROM t;\n");
  CHECK_FALSE(m.transactional);
  CHECK(m.statements_from_query);
  CHECK(m.concurrent_index.empty());
  CHECK(
      malformed_reason("0024_each.sql", "-- boxcar:statements-from-query\nSELECT 'x';").find("needs no-transaction") !=
      std::string::npos);
  CHECK(malformed_reason("0024_each.sql",
                         "-- boxcar:no-transaction\n-- boxcar:statements-from-query\nCREATE INDEX CONCURRENTLY "
                         "IF NOT EXISTS a ON t (x);")
            .find("one query") != std::string::npos);

  using boxcar::detail::generated_concurrent_index;
  CHECK(generated_concurrent_index("0024_each.sql", "CREATE INDEX CONCURRENTLY IF NOT EXISTS t_x_p1 ON s.t_p1 (x)") ==
        "t_x_p1");
  CHECK(generated_concurrent_index("0024_each.sql", "create unique index concurrently if not exists u ON t (x);") ==
        "u");
  const auto refused = [](std::string_view statement) {
    try {
      generated_concurrent_index("0024_each.sql", statement);
    } catch (const MigrationError& e) {
      CHECK(e.code() == "MIGRATION_FAILED");
      return std::string(e.what());
    }
    FAIL("expected MIGRATION_FAILED for " << statement);
    return std::string();
  };
  CHECK(refused("DROP TABLE t").find("0024_each.sql") != std::string::npos);
  CHECK(refused("CREATE INDEX CONCURRENTLY a ON t (x)").find("IF NOT EXISTS") != std::string::npos);
  CHECK(refused("CREATE INDEX CONCURRENTLY IF NOT EXISTS \"A\" ON t (x)").find("lower-case") != std::string::npos);
  CHECK(refused("CREATE INDEX CONCURRENTLY IF NOT EXISTS a ON t (x); DROP TABLE t").find("DROP TABLE t") !=
        std::string::npos);
}

TEST_CASE("malformed directives and unsafe no-transaction steps are refused naming the file") {
  CHECK(malformed_reason("0009_a.sql", "-- boxcar:no-transactions\nSELECT 1;").find("0009_a.sql") != std::string::npos);
  CHECK(malformed_reason("0009_a.sql", "-- boxcar:compatible-with 10\nSELECT 1;").find("newer") != std::string::npos);
  CHECK(malformed_reason("0009_a.sql", "-- boxcar:compatible-with x\nSELECT 1;").find("positive") != std::string::npos);
  CHECK(malformed_reason("0009_a.sql", "-- boxcar:previous-checksum abc\nSELECT 1;").find("previous-checksum") !=
        std::string::npos);
  CHECK(malformed_reason("0009_a.sql",
                         "-- boxcar:no-transaction\nCREATE INDEX CONCURRENTLY IF NOT EXISTS a ON t "
                         "(x);\nCREATE INDEX CONCURRENTLY IF NOT EXISTS b ON t (y);")
            .find("exactly one statement") != std::string::npos);
  CHECK(malformed_reason("0009_a.sql", "-- boxcar:no-transaction\nCREATE INDEX CONCURRENTLY a ON t (x);")
            .find("IF NOT EXISTS") != std::string::npos);
  CHECK(malformed_reason("x_a.sql", "SELECT 1;").find("version") != std::string::npos);
}

TEST_CASE("every embedded migration parses, in version order without gaps") {
  const auto all = embedded_migrations();
  REQUIRE_FALSE(all.empty());
  for (std::size_t i = 0; i < all.size(); ++i) CHECK(all[i].version == static_cast<int>(i) + 1);
}

TEST_CASE("0003 accepts the checksum of its text from before its indexes moved to 0005-0008") {
  const auto all = embedded_migrations();
  REQUIRE(all.size() >= 8);
  CHECK(all[2].previous_checksums ==
        std::vector<std::string>{"df049d5edddc808fd65979d0ab8f8af4445c6c22a4431fd095746efcaf6ebd47"});
  for (int i = 4; i < 8; ++i) {
    INFO(all[i].name);
    CHECK_FALSE(all[i].transactional);
    CHECK_FALSE(all[i].concurrent_index.empty());
  }
}

// The tables a transactional migration indexes without creating them in the same file. An
// index ON ONLY a partitioned table builds nothing (a catalog change, INVALID until its
// partitions' indexes are attached: 0038), so it does not count.
static std::set<std::string> indexed_existing_tables(const boxcar::detail::MigrationFile& m) {
  static const std::regex kIndex(
      R"(CREATE\s+(?:UNIQUE\s+)?INDEX\s+(?:CONCURRENTLY\s+)?(?:IF\s+NOT\s+EXISTS\s+)?\w+\s+ON\s+(?!ONLY\s)(\w+))",
      std::regex::icase);
  static const std::regex kTable(R"(CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(\w+))", std::regex::icase);
  std::set<std::string> offending;
  if (!m.transactional) return offending;
  const std::string sql = boxcar::detail::strip_sql_comments(m.sql);
  std::set<std::string> created;
  for (std::sregex_iterator it(sql.begin(), sql.end(), kTable), end; it != end; ++it) created.insert((*it)[1]);
  for (std::sregex_iterator it(sql.begin(), sql.end(), kIndex), end; it != end; ++it)
    if (!created.contains((*it)[1])) offending.insert((*it)[1]);
  return offending;
}

TEST_CASE("from 0005 on, an index on an existing table is built concurrently in its own step") {
  // An index created in a transaction holds a SHARE lock on its table, blocking every
  // writer, for the whole build. Only a table created by the same file may be indexed so.
  for (const auto& m : embedded_migrations()) {
    if (m.version < 5) continue;
    INFO(m.name);
    CHECK(indexed_existing_tables(m).empty());
  }
  // The rule catches what it is for: 0003's old text, and spares a table's own indexes.
  const auto old_0003 = parse_migration_file(
      "0003_operations.sql", "ALTER TABLE t ADD COLUMN c int;\nCREATE INDEX t_c ON t (c) WHERE c > 0;\n");
  CHECK(indexed_existing_tables(old_0003) == std::set<std::string>{"t"});
  const auto new_table =
      parse_migration_file("0009_u.sql", "CREATE TABLE u (id int);\nCREATE UNIQUE INDEX u_id ON u (id);\n");
  CHECK(indexed_existing_tables(new_table).empty());
  const auto parent_only = parse_migration_file("0009_p.sql", "CREATE INDEX p_x ON ONLY p (x);\n");
  CHECK(indexed_existing_tables(parent_only).empty());
}
