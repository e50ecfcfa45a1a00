#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <thread>

#include "boxcar/core/error.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/testing/eventually.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::kMigrated;
using boxcar::testing::TestDatabase;

TEST_CASE("migrate applies every embedded migration once and records its checksum") {
  TestDatabase db(kMigrated);  // already migrated by the fixture
  CHECK(latest_migration_version() >= 1);
  CHECK(applied_migration_version(db.url(), {.schema = db.schema()}) == latest_migration_version());
  CHECK(db.scalar("SELECT count(*) FROM {schema}.schema_migrations") == latest_migration_version());
  CHECK(db.scalar("SELECT count(*) FROM {schema}.schema_migrations WHERE checksum ~ '^[0-9a-f]{64}$'") ==
        latest_migration_version());
  CHECK(db.scalar("SELECT count(*) FROM pg_tables WHERE schemaname = '" + db.schema() +
                  "' AND tablename = 'inbox_receipts'") == 1);
}

TEST_CASE("migrate is idempotent") {
  TestDatabase db(kMigrated);
  const auto report = migrate(db.url(), {.schema = db.schema()});
  CHECK(report.applied.empty());
  CHECK(report.version == latest_migration_version());
  CHECK(db.scalar("SELECT count(*) FROM {schema}.schema_migrations") == latest_migration_version());
}

TEST_CASE("migrate refuses to run when an applied migration's checksum changed") {
  TestDatabase db(kMigrated);
  db.query("UPDATE {schema}.schema_migrations SET checksum = repeat('0', 64) WHERE version = 1");
  try {
    migrate(db.url(), {.schema = db.schema()});
    FAIL("expected MigrationError");
  } catch (const MigrationError& e) {
    CHECK(e.code() == "MIGRATION_CHECKSUM_MISMATCH");
  }
}

TEST_CASE("an installation that applied a file's text from before its comments were reworded keeps passing") {
  // Each of these files lists that text's checksum as -- boxcar:previous-checksum: the
  // statements are the same, only comments changed.
  const std::map<int, std::string> earlier_text = {
      {12, "b627f4eb2e11b5ca53d0dc3f81f9685a8b35a397c2aff34caf2bfec926248023"},
      {20, "3c67c569ff991997bfefe4883f429c3a4f984a7f5ff2f2ce2036c8e6209acd6c"},
      {21, "7dc931ca3787fc49fea3e9c4f02db7f47cbda03309a8654658a8c3bd23584a3a"},
      {22, "744a5a196cedb0a0c254988c5832657fadaee652598d3d83270a75826d7988a6"},
      {23, "fe3ff5d46fb814e7492c13d6947b874ee5af6d1a05aa8fd50377d01ecd503040"},
      {26, "5d31034b1a027ac87d837c7dadcfce198cfaed22809237f4526a9b2266a2a222"},
      {27, "a58cd5ed37f02f40174c5efe75c9aab3d8c0d30e1167905245f893fe3d7c8113"},
      {28, "7db73dd36c250bea51cd7fffae35e8a53f0d7a77ab9c32ed6cd84e105cae44d5"},
      {32, "677f8e5d44e42ccf1976ea5191c7b44282950a91d30fdac148b726b819dd2aae"}};
  TestDatabase db(kMigrated);
  for (const auto& [version, checksum] : earlier_text)
    db.query("UPDATE {schema}.schema_migrations SET checksum = '" + checksum +
             "' WHERE version = " + std::to_string(version));
  const auto report = migrate(db.url(), {.schema = db.schema()});
  CHECK(report.applied.empty());
  CHECK(report.version == latest_migration_version());
  // Any other text of them is still refused.
  db.query("UPDATE {schema}.schema_migrations SET checksum = repeat('1', 64) WHERE version = 32");
  try {
    migrate(db.url(), {.schema = db.schema()});
    FAIL("expected MigrationError");
  } catch (const MigrationError& e) {
    CHECK(e.code() == "MIGRATION_CHECKSUM_MISMATCH");
  }
}

TEST_CASE("migrate refuses a database that recorded a version this build does not know") {
  TestDatabase db(kMigrated);
  db.query("INSERT INTO {schema}.schema_migrations (version, name, checksum) VALUES (9999, 'x', 'y')");
  try {
    migrate(db.url(), {.schema = db.schema()});
    FAIL("expected MigrationError");
  } catch (const MigrationError& e) {
    CHECK(e.code() == "MIGRATION_UNKNOWN_VERSION");
  }
}

TEST_CASE("concurrent migrate calls on a fresh schema serialise and apply each file once") {
  const std::string url = boxcar::testing::database_url();
  const std::string schema = "bx_concurrent_" + std::to_string(std::random_device{}() % 100000);
  std::vector<std::thread> runners;
  std::atomic<int> failures{0};
  std::atomic<int> applied{0};
  for (int i = 0; i < 8; ++i) {
    runners.emplace_back([&] {
      try {
        applied += static_cast<int>(migrate(url, {.schema = schema}).applied.size());
      } catch (...) {
        ++failures;
      }
    });
  }
  for (auto& t : runners) t.join();
  CHECK(failures == 0);
  CHECK(applied == latest_migration_version());
  pqxx::connection c(url);
  pqxx::nontransaction tx(c);
  CHECK(tx.exec1("SELECT count(*) FROM " + quote_identifier(schema) + ".schema_migrations")[0].as<int>() ==
        latest_migration_version());
  tx.exec("DROP SCHEMA " + quote_identifier(schema) + " CASCADE");
}

TEST_CASE("two schemas in one database migrate independently") {
  TestDatabase a(kMigrated);
  TestDatabase b(kMigrated);
  a.query(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint) VALUES ('global', 's', 'c', 'm', 'e', 1, '{}', repeat('a', 64))");
  CHECK(a.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);
  CHECK(b.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 0);
}

TEST_CASE("the boxcar migrate command applies migrations and reports the version") {
  const std::string url = boxcar::testing::database_url();
  const std::string schema = "bx_cli_" + std::to_string(std::random_device{}() % 100000);
  const std::string command =
      std::string(BOXCAR_CLI_PATH) + " --database-url '" + url + "' --schema " + schema + " migrate > /dev/null";
  CHECK(std::system(command.c_str()) == 0);
  CHECK(applied_migration_version(url, {.schema = schema}) == latest_migration_version());
  CHECK(std::system(command.c_str()) == 0);  // second run: nothing to do, still success
  const std::string bad =
      std::string(BOXCAR_CLI_PATH) + " --database-url '" + url + "' --schema 'Bad' migrate 2> /dev/null";
  CHECK(WEXITSTATUS(std::system(bad.c_str())) == 2);
  pqxx::connection c(url);
  pqxx::nontransaction(c).exec("DROP SCHEMA " + quote_identifier(schema) + " CASCADE");
}

TEST_CASE("the inbox table rejects impossible states") {
  TestDatabase db(kMigrated);
  const std::string insert =
      "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, "
      "event_type, schema_version, payload, fingerprint, status, claim_token, lease_expires_at) VALUES ";
  const std::string fp = "repeat('a', 64)";
  // A global scope with a tenant id.
  CHECK_THROWS_AS(db.query(insert + "('global', 't', 's', 'c', 'm', 'e', 1, '{}', " + fp + ", 'PENDING', NULL, NULL)"),
                  pqxx::check_violation);
  // A tenant scope without one.
  CHECK_THROWS_AS(db.query(insert + "('tenant', '', 's', 'c', 'm', 'e', 1, '{}', " + fp + ", 'PENDING', NULL, NULL)"),
                  pqxx::check_violation);
  // PROCESSING without a claim token.
  CHECK_THROWS_AS(
      db.query(insert + "('global', '', 's', 'c', 'm', 'e', 1, '{}', " + fp + ", 'PROCESSING', NULL, NULL)"),
      pqxx::check_violation);
  // A claim token on a PENDING row.
  CHECK_THROWS_AS(
      db.query(insert + "('global', '', 's', 'c', 'm', 'e', 1, '{}', " + fp + ", 'PENDING', gen_random_uuid(), now())"),
      pqxx::check_violation);
  // An unknown status, a schema version of 0.
  CHECK_THROWS_AS(db.query(insert + "('global', '', 's', 'c', 'm', 'e', 1, '{}', " + fp + ", 'DONE', NULL, NULL)"),
                  pqxx::check_violation);
  CHECK_THROWS_AS(db.query(insert + "('global', '', 's', 'c', 'm', 'e', 0, '{}', " + fp + ", 'PENDING', NULL, NULL)"),
                  pqxx::check_violation);
  // COMPLETED without completed_at.
  CHECK_THROWS_AS(db.query(insert + "('global', '', 's', 'c', 'm', 'e', 1, '{}', " + fp + ", 'COMPLETED', NULL, NULL)"),
                  pqxx::check_violation);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 0);
}

TEST_CASE("claiming the next rows of a consumer is an index scan on the claimable index") {
  TestDatabase db(kMigrated);
  db.query(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint, status, completed_at) "
      "SELECT 'global', 's', 'c' || (g % 20), 'm' || g, 'e', 1, '{}', repeat('a', 64), "
      "CASE WHEN g % 50 = 0 THEN 'PENDING' ELSE 'COMPLETED' END, "
      "CASE WHEN g % 50 = 0 THEN NULL ELSE now() END FROM generate_series(1, 20000) g");
  db.query("ANALYZE {schema}.inbox_receipts");
  std::string plan;
  for (const auto& row : db.query("EXPLAIN SELECT id FROM {schema}.inbox_receipts "
                                  "WHERE consumer = 'c0' AND status IN ('PENDING', 'RETRYABLE') "
                                  "AND available_at <= now() AND NOT suspect ORDER BY available_at LIMIT 32 "
                                  "FOR NO KEY UPDATE SKIP LOCKED"))
    plan += std::string(row[0].c_str()) + "\n";
  INFO(plan);
  CHECK(plan.find("inbox_receipts_claimable") != std::string::npos);
  CHECK(plan.find("Seq Scan") == std::string::npos);
}

TEST_CASE("vacuum of the inbox cleans its indexes when few pages hold dead rows, so every page ends all-visible") {
  // PostgreSQL's default (vacuum_index_cleanup = auto) skips index vacuuming when fewer
  // than 2% of the pages hold dead items, and a page that keeps one is never all-visible:
  // index-only scans then read it from the heap. 0032 turns cleaning on for the inbox.
  TestDatabase db(kMigrated);
  db.query(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint, status, completed_at) "
      "SELECT 'global', 's', 'c', 'm' || g, 'e', 1, '{}', repeat('a', 64), 'COMPLETED', now() "
      "FROM generate_series(1, 20000) g");
  db.query("VACUUM {schema}.inbox_receipts");
  const std::int64_t pages = db.scalar("SELECT relpages FROM pg_class WHERE oid = '{schema}.inbox_receipts'::regclass");
  REQUIRE(pages >= 200);
  // Five dead rows on five pages: far below 2% of them.
  db.query("DELETE FROM {schema}.inbox_receipts WHERE message_id IN ('m1', 'm5000', 'm10000', 'm15000', 'm20000')");
  // Other tests share the cluster: a snapshot of theirs can keep the rows from being
  // removable for a moment, so vacuum runs until the pages are all-visible. Without 0032
  // they never are, however often it runs.
  const auto all_visible = [&] {
    db.query("VACUUM {schema}.inbox_receipts");
    return db.scalar("SELECT relpages - relallvisible FROM pg_class WHERE oid = '{schema}.inbox_receipts'::regclass") ==
           0;
  };
  CHECK(boxcar::testing::eventually(all_visible, std::chrono::seconds(60)));
  CHECK(db.scalar("SELECT count(*) FROM pg_class WHERE oid = '{schema}.inbox_receipts'::regclass AND "
                  "'vacuum_index_cleanup=on' = ANY (reloptions)") == 1);
}

TEST_CASE("the suspect lane's claim and probe are index scans on the suspects index") {
  TestDatabase db(kMigrated);
  // A large backlog with a handful of suspects, as after one worker crash.
  db.query(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint, status, completed_at, suspect) "
      "SELECT 'global', 's', 'c' || (g % 20), 'm' || g, 'e', 1, '{}', repeat('a', 64), "
      "CASE WHEN g % 5 = 0 THEN 'PENDING' ELSE 'COMPLETED' END, "
      "CASE WHEN g % 5 = 0 THEN NULL ELSE now() END, g % 2000 = 0 FROM generate_series(1, 20000) g");
  db.query("ANALYZE {schema}.inbox_receipts");
  for (const std::string select : {"SELECT id", "SELECT 1"}) {
    std::string plan;
    for (const auto& row : db.query("EXPLAIN " + select +
                                    " FROM {schema}.inbox_receipts "
                                    "WHERE consumer = 'c0' AND suspect AND status IN ('PENDING', 'RETRYABLE') "
                                    "AND available_at <= now() ORDER BY available_at LIMIT 1"))
      plan += std::string(row[0].c_str()) + "\n";
    INFO(plan);
    CHECK(plan.find("inbox_receipts_suspects") != std::string::npos);
    CHECK(plan.find("Seq Scan") == std::string::npos);
  }
}

TEST_CASE("migrate refuses a schema in which every role may create, and applies nothing there") {
  const std::string url = boxcar::testing::database_url();
  const std::string schema = "bx_open_" + std::to_string(std::random_device{}() % 1000000);
  pqxx::connection c(url);
  pqxx::nontransaction(c).exec("CREATE SCHEMA " + quote_identifier(schema));
  pqxx::nontransaction(c).exec("GRANT CREATE ON SCHEMA " + quote_identifier(schema) + " TO PUBLIC");
  try {
    migrate(url, {.schema = schema});
    FAIL("migrate ran in a schema where PUBLIC may CREATE");
  } catch (const MigrationError& e) {
    CHECK(e.code() == "MIGRATION_SCHEMA_UNSAFE");
    CHECK(std::string(e.what()).find("REVOKE CREATE ON SCHEMA") != std::string::npos);
  }
  CHECK(pqxx::nontransaction(c)
            .exec_params1("SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename <> "
                          "'schema_migrations'",
                          schema)[0]
            .as<int>() == 0);
  // Once revoked, the same schema migrates.
  pqxx::nontransaction(c).exec("REVOKE CREATE ON SCHEMA " + quote_identifier(schema) + " FROM PUBLIC");
  CHECK(migrate(url, {.schema = schema}).version == latest_migration_version());
  pqxx::nontransaction(c).exec("DROP SCHEMA " + quote_identifier(schema) + " CASCADE");
}
