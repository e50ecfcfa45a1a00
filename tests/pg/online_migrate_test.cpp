// Online upgrades: the migration runner against real PostgreSQL while other sessions hold
// locks, die, or keep writing. Behaviour is asserted through pg_locks, pg_stat_activity,
// pg_stat_progress_create_index and schema_migrations, never through timings.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <random>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "boxcar/core/detail/migration_session.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/testing/eventually.hpp"
#include "index_definitions.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace std::chrono_literals;
using boxcar::testing::index_definitions_of;
using boxcar::testing::kMigrated;
using boxcar::testing::TestDatabase;

namespace {

const std::string kOldChecksum0003 = "df049d5edddc808fd65979d0ab8f8af4445c6c22a4431fd095746efcaf6ebd47";
const std::vector<std::string> kMovedIndexes = {"inbox_receipts_dead", "outbox_events_dead", "inbox_receipts_completed",
                                                "outbox_events_published"};

// A schema migrated only up to `version`, dropped at the end: an installation that an
// upgrade is about to migrate.
class PartialSchema {
 public:
  explicit PartialSchema(int version)
      : url_(boxcar::testing::database_url()),
        schema_("bx_online_" + std::to_string(std::random_device{}() % 1000000)) {
    migrate(url_, {.schema = schema_, .target_version = version});
  }
  ~PartialSchema() {
    try {
      pqxx::connection c(url_);
      pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema_) + " CASCADE");
    } catch (...) {
    }
  }
  const std::string& url() const { return url_; }
  const std::string& schema() const { return schema_; }
  std::string q(const std::string& table) const { return quote_identifier(schema_) + "." + table; }
  long long scalar(const std::string& sql) const {
    pqxx::connection c(url_);
    return pqxx::nontransaction(c).exec1(sql)[0].as<long long>();
  }
  int version() const { return applied_migration_version(url_, {.schema = schema_}); }

 private:
  std::string url_;
  std::string schema_;
};

long long valid_moved_indexes(const std::string& url, const std::string& schema) {
  pqxx::connection c(url);
  return pqxx::nontransaction(c)
      .exec_params1(
          "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
          "JOIN pg_namespace n ON n.oid = c.relnamespace "
          "WHERE n.nspname = $1 AND c.relname = ANY($2::text[]) AND i.indisvalid AND i.indisready",
          schema, "{inbox_receipts_dead,outbox_events_dead,inbox_receipts_completed,outbox_events_published}")[0]
      .as<long long>();
}

template <class Error>
std::string error_of(const std::function<void()>& f, const std::string& code) {
  try {
    f();
  } catch (const Error& e) {
    CHECK(e.code() == code);
    return e.what();
  }
  FAIL("expected " << code);
  return {};
}

// Every migration version from `first` to the newest this build embeds.
std::vector<int> versions_from(int first) {
  std::vector<int> versions;
  for (int v = first; v <= latest_migration_version(); ++v) versions.push_back(v);
  return versions;
}

}  // namespace

TEST_CASE("an installation that applied 0003 with its old text keeps its checksum and reuses its indexes") {
  // At 16: 0005-0008 build their indexes on outbox_events before 0019 partitions it (an
  // installation without them recorded is older than 0017).
  PartialSchema db(16);
  const auto exec = [&](const std::string& sql) {
    pqxx::connection c(db.url());
    pqxx::nontransaction(c).exec(sql);
  };
  // What an installation migrated before online upgrades looks like: 0003's old checksum,
  // the four indexes built by it, and none of 0005-0008 recorded.
  exec("UPDATE " + db.q("schema_migrations") + " SET checksum = '" + kOldChecksum0003 + "' WHERE version = 3");
  // (0009 and later stay recorded: their objects exist in the test schema.)
  exec("DELETE FROM " + db.q("schema_migrations") + " WHERE version BETWEEN 5 AND 8");
  const auto report = migrate(db.url(), {.schema = db.schema()});
  std::vector<int> expected = {5, 6, 7, 8};
  for (int v : versions_from(17)) expected.push_back(v);
  CHECK(report.applied == expected);
  CHECK(valid_moved_indexes(db.url(), db.schema()) == 4);
  CHECK(db.scalar("SELECT count(*) FROM pg_indexes WHERE schemaname = '" + db.schema() + "'") ==
        db.scalar("SELECT count(DISTINCT indexname) FROM pg_indexes WHERE schemaname = '" + db.schema() + "'"));
  // Any other text of 0003 is still refused.
  exec("UPDATE " + db.q("schema_migrations") + " SET checksum = repeat('1', 64) WHERE version = 3");
  error_of<MigrationError>([&] { migrate(db.url(), {.schema = db.schema()}); }, "MIGRATION_CHECKSUM_MISMATCH");
}

TEST_CASE("a concurrent index build that failed before is dropped and built again on the next run") {
  TestDatabase db(kMigrated);
  db.query("DROP INDEX {schema}.inbox_receipts_dead");
  db.query("DELETE FROM {schema}.schema_migrations WHERE version = 5");
  db.query(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, schema_version, "
      "payload, fingerprint, status, dead_reason) SELECT 'global', 's', 'c', 'm' || g, 'e', 1, '{}', "
      "repeat('a', 64), 'DEAD', 'x' FROM generate_series(1, 2) g");
  // A UNIQUE build over two equal keys fails and leaves an INVALID index under the name
  // 0005 builds: exactly what an interrupted CREATE INDEX CONCURRENTLY leaves.
  CHECK_THROWS_AS(db.query("CREATE UNIQUE INDEX CONCURRENTLY inbox_receipts_dead ON {schema}.inbox_receipts "
                           "(consumer) WHERE status = 'DEAD'"),
                  pqxx::unique_violation);
  CHECK(valid_moved_indexes(db.url(), db.schema()) == 3);

  const auto report = migrate(db.url(), {.schema = db.schema()});
  CHECK(report.applied == std::vector<int>{5});
  CHECK(valid_moved_indexes(db.url(), db.schema()) == 4);
  CHECK(db.scalar("SELECT count(*) FROM " + index_definitions_of(db.schema()) +
                  " WHERE indexname = 'inbox_receipts_dead' AND indexdef LIKE '%(consumer, updated_at)%' "
                  "AND indexdef NOT LIKE '%UNIQUE%'") == 1);
}

TEST_CASE("DDL that finds its table locked gives up after lock_timeout and is retried until the lock is gone") {
  PartialSchema schema(2);
  pqxx::connection blocker_connection(schema.url());
  pqxx::work blocker(blocker_connection);
  blocker.exec("LOCK TABLE " + schema.q("inbox_receipts") + " IN ACCESS SHARE MODE");

  SECTION("a bounded number of tries ends in MIGRATION_LOCK_TIMEOUT naming the holder, nothing applied") {
    const auto message = error_of<MigrationError>(
        [&] {
          migrate(schema.url(),
                  {.schema = schema.schema(), .lock_timeout = 50ms, .max_lock_attempts = 3, .retry_backoff = 1ms});
        },
        "MIGRATION_LOCK_TIMEOUT");
    CHECK(message.find("3 tries") != std::string::npos);
    CHECK(message.find("pid " + std::to_string(blocker_connection.backendpid())) != std::string::npos);
    CHECK(schema.version() == 2);
  }

  SECTION("the migration applies once the holder commits, and reports its retries") {
    auto running = std::async(std::launch::async, [&] {
      return migrate(
          schema.url(),
          {.schema = schema.schema(), .lock_timeout = 200ms, .max_lock_attempts = 1000, .retry_backoff = 1ms});
    });
    // Two different statements of the runner seen waiting for a lock: it timed out and
    // tried again. Then the holder lets go.
    pqxx::connection observer(schema.url());
    std::set<std::string> waits;
    const bool retried = boxcar::testing::eventually(
        [&] {
          // Waits on this schema's tables only: other tests migrate in the same database.
          const auto rows = pqxx::nontransaction(observer).exec_params(
              "SELECT DISTINCT a.query_start::text FROM pg_stat_activity a "
              "JOIN pg_locks l ON l.pid = a.pid AND NOT l.granted JOIN pg_class c ON c.oid = l.relation "
              "JOIN pg_namespace n ON n.oid = c.relnamespace "
              "WHERE a.application_name = 'boxcar migrate' AND n.nspname = $1",
              schema.schema());
          for (const auto& row : rows) waits.insert(row[0].c_str());
          return waits.size() >= 2;
        },
        30s);
    CHECK(retried);
    blocker.commit();
    REQUIRE(running.wait_for(30s) == std::future_status::ready);
    const auto report = running.get();
    CHECK(report.applied == versions_from(3));
    REQUIRE_FALSE(report.lock_retries.empty());
    CHECK(report.lock_retries.front().version == 3);
    CHECK(report.lock_retries.front().reason.find("lock timeout") != std::string::npos);
    CHECK(schema.version() == latest_migration_version());
  }
}

TEST_CASE("the wait for another runner's migration lock is bounded and names the session holding it") {
  TestDatabase db(kMigrated);
  pqxx::connection holder(db.url());
  pqxx::nontransaction(holder).exec("SET application_name = 'lock-holder-under-test'");
  pqxx::nontransaction(holder).exec_params("SELECT pg_advisory_lock(hashtextextended('boxcar.migrate:' || $1, 0))",
                                           db.schema());
  const auto message = error_of<MigrationError>([&] { migrate(db.url(), {.schema = db.schema(), .lock_wait = 300ms}); },
                                                "MIGRATION_LOCK_BUSY");
  CHECK(message.find("pid " + std::to_string(holder.backendpid())) != std::string::npos);
  CHECK(message.find("lock-holder-under-test") != std::string::npos);
  // Released: the next run goes through.
  pqxx::nontransaction(holder).exec_params("SELECT pg_advisory_unlock(hashtextextended('boxcar.migrate:' || $1, 0))",
                                           db.schema());
  CHECK(migrate(db.url(), {.schema = db.schema(), .lock_wait = 300ms}).applied.empty());
}

TEST_CASE("a migration session terminated between files fails typed instead of going on without its lock") {
  PartialSchema schema(1);
  pqxx::connection killer(schema.url());
  int killed = 0;
  const auto message = error_of<MigrationError>(
      [&] {
        migrate(schema.url(), {.schema = schema.schema(), .before_step = [&](const MigrationStep& step) {
                                 if (step.version != 3) return;
                                 killed = step.backend_pid;
                                 pqxx::nontransaction(killer).exec_params("SELECT pg_terminate_backend($1)", killed);
                                 // Gone for sure before the runner goes on.
                                 CHECK(boxcar::testing::eventually(
                                     [&] {
                                       return pqxx::nontransaction(killer)
                                                  .exec_params1("SELECT count(*) FROM pg_stat_activity WHERE pid = $1",
                                                                killed)[0]
                                                  .as<int>() == 0;
                                     },
                                     10s));
                               }});
      },
      "MIGRATION_LOCK_LOST");
  CHECK(killed != 0);
  CHECK(message.find("run migrate again") != std::string::npos);
  // Nothing after the kill was applied, by this session or a silently reconnected one.
  CHECK(schema.version() == 2);
  CHECK(migrate(schema.url(), {.schema = schema.schema()}).applied == versions_from(3));
}

TEST_CASE("the migration session never reconnects once its backend is gone, unlike a default libpqxx connection") {
  const std::string url = boxcar::testing::database_url();
  pqxx::connection killer(url);
  const auto terminate = [&](int pid) {
    pqxx::nontransaction(killer).exec_params("SELECT pg_terminate_backend($1)", pid);
    REQUIRE(boxcar::testing::eventually(
        [&] {
          return pqxx::nontransaction(killer)
                     .exec_params1("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", pid)[0]
                     .as<int>() == 0;
        },
        10s));
  };
  const auto use = [](pqxx::connection& c) {
    return pqxx::nontransaction(c).exec1("SELECT pg_backend_pid()")[0].as<int>();
  };

  const auto first_success = [&](pqxx::connection& c) -> std::optional<int> {
    for (int i = 0; i < 4; ++i) {
      try {
        return use(c);
      } catch (const pqxx::broken_connection&) {
      }
    }
    return std::nullopt;
  };
  // The pitfall (docs/schema.md, "Online migrations"): after its backend died, a default
  // libpqxx 6.4 connection fails a use or two, then quietly works again on a new backend.
  // A session-level advisory lock would be gone without a word.
  pqxx::connection plain(url);
  const int plain_pid = plain.backendpid();
  terminate(plain_pid);
  const auto reopened = first_success(plain);
  REQUIRE(reopened.has_value());
  CHECK(*reopened != plain_pid);

  auto session = boxcar::detail::open_migration_session(url, 2s);
  terminate(session->backendpid());
  CHECK_FALSE(first_success(*session).has_value());
  CHECK_FALSE(session->is_open());
}

TEST_CASE("a schema with a newer migration marked compatible is accepted, an incompatible one is refused") {
  TestDatabase db(kMigrated);
  const int build = latest_migration_version();
  const std::string newer = std::to_string(build + 1);

  db.query("INSERT INTO {schema}.schema_migrations (version, name, checksum, compatible_with) VALUES (" + newer +
           ", 'newer.sql', repeat('a', 64), " + std::to_string(build) + ")");
  auto status = check_schema_compatibility(db.url(), {.schema = db.schema()});
  CHECK(status.compatible);
  CHECK(status.applied_version == build + 1);
  CHECK(status.detail.find("marked compatible") != std::string::npos);
  const auto report = migrate(db.url(), {.schema = db.schema()});
  CHECK(report.applied.empty());
  CHECK(report.version == build + 1);

  db.query("UPDATE {schema}.schema_migrations SET compatible_with = " + newer + " WHERE version = " + newer);
  status = check_schema_compatibility(db.url(), {.schema = db.schema()});
  CHECK_FALSE(status.compatible);
  CHECK(status.detail.find("not compatible") != std::string::npos);
  const auto message =
      error_of<MigrationError>([&] { migrate(db.url(), {.schema = db.schema()}); }, "MIGRATION_UNKNOWN_VERSION");
  CHECK(message.find("needs a Boxcar that knows migration " + newer) != std::string::npos);
}

TEST_CASE("a schema migrated by a Boxcar without compatibility markers gets the column and keeps its rows") {
  TestDatabase db(kMigrated);
  db.query("ALTER TABLE {schema}.schema_migrations DROP COLUMN compatible_with");
  CHECK(check_schema_compatibility(db.url(), {.schema = db.schema()}).compatible);
  // 0007, an index on inbox_receipts: 0008's outbox_events is partitioned now (0019), where
  // CREATE INDEX CONCURRENTLY is refused.
  db.query("DELETE FROM {schema}.schema_migrations WHERE version = 7");
  CHECK(migrate(db.url(), {.schema = db.schema()}).applied == std::vector<int>{7});
  CHECK(db.scalar("SELECT count(*) FROM {schema}.schema_migrations WHERE compatible_with IS NULL") ==
        latest_migration_version() - 1);
  CHECK(db.scalar("SELECT compatible_with FROM {schema}.schema_migrations WHERE version = 7") == 4);
}

TEST_CASE("accept keeps working while migrate builds an index concurrently on a table of 1M rows") {
  // At 14, the next step is 0015, an index built concurrently on inbox_receipts; the
  // accepting Inbox is this release's, whose insert needs 0012's columns.
  PartialSchema schema(14);
  {
    pqxx::connection c(schema.url());
    pqxx::nontransaction(c).exec(
        "INSERT INTO " + schema.q("inbox_receipts") +
        " (scope_kind, source, consumer, message_id, event_type, schema_version, payload, fingerprint, status, "
        "completed_at) SELECT 'global', 's', 'c' || (g % 16), 'm' || g, 'e', 1, '{}', repeat('a', 64), "
        "'COMPLETED', now() FROM generate_series(1, 1000000) g");
    pqxx::nontransaction(c).exec("ANALYZE " + schema.q("inbox_receipts"));
  }
  // An ordinary writer whose transaction is open when the build starts: CREATE INDEX
  // CONCURRENTLY waits for it ("waiting for writers before build"), which holds the
  // build in progress for as long as this test needs, with no timing involved.
  pqxx::connection writer_connection(schema.url());
  pqxx::work writer(writer_connection);
  writer.exec("INSERT INTO " + schema.q("inbox_receipts") +
              " (scope_kind, source, consumer, message_id, event_type, schema_version, payload, fingerprint) "
              "VALUES ('global', 's', 'c', 'open-writer', 'e', 1, '{}', repeat('a', 64))");

  auto running = std::async(std::launch::async,
                            [&] { return migrate(schema.url(), {.schema = schema.schema(), .lock_timeout = 120s}); });
  pqxx::connection observer(schema.url());
  const std::string in_progress =
      "SELECT count(*) FROM pg_stat_progress_create_index p JOIN pg_class c ON c.oid = p.relid "
      "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '" +
      schema.schema() + "' AND c.relname = 'inbox_receipts' AND p.command = 'CREATE INDEX CONCURRENTLY'";
  REQUIRE(boxcar::testing::eventually(
      [&] { return pqxx::nontransaction(observer).exec1(in_progress)[0].as<int>() == 1; }, 60s));
  // The build's own session (other tests migrate in the same database at the same time).
  const int migrator = pqxx::nontransaction(observer)
                           .exec1(
                               "SELECT p.pid FROM pg_stat_progress_create_index p JOIN pg_class c ON c.oid = p.relid "
                               "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = '" +
                               schema.schema() + "'")[0]
                           .as<int>();

  auto pool = ConnectionPool::create({.url = schema.url(), .size = 4});
  Inbox inbox(pool, {.schema = schema.schema(), .consumers = {"orders.v1"}});
  int accepted = 0;
  for (int i = 0; i < 20; ++i) {
    auto call = std::async(std::launch::async, [&, i] {
      return inbox.accept({.scope = Scope::tenant("t"),
                           .source = "orders-service",
                           .consumer = "orders.v1",
                           .message_id = "during-migration-" + std::to_string(i),
                           .event_type = "order.created",
                           .schema_version = 1,
                           .payload = {{"i", i}}});
    });
    // Liveness bound, not a timing assertion: a blocked accept would wait forever.
    REQUIRE(call.wait_for(10s) == std::future_status::ready);
    CHECK(call.get().kind == Receipt::Kind::Accepted);
    ++accepted;
  }
  // The build was in progress before and after every accept, and nobody but the build
  // itself waits on a lock on this schema's tables.
  CHECK(pqxx::nontransaction(observer).exec1(in_progress)[0].as<int>() == 1);
  CHECK(pqxx::nontransaction(observer)
            .exec_params1("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation "
                          "JOIN pg_namespace n ON n.oid = c.relnamespace "
                          "WHERE NOT l.granted AND n.nspname = $2 AND l.pid <> $1",
                          migrator, schema.schema())[0]
            .as<int>() == 0);
  CHECK(accepted == 20);

  writer.commit();
  REQUIRE(running.wait_for(120s) == std::future_status::ready);
  CHECK(running.get().applied == versions_from(15));
  CHECK(valid_moved_indexes(schema.url(), schema.schema()) == 4);
  CHECK(schema.scalar("SELECT count(*) FROM " + schema.q("inbox_receipts") +
                      " WHERE message_id LIKE 'during-migration-%'") == 20);
}

TEST_CASE(
    "the inbox's claimable and DEAD indexes become covering under their old names, built and dropped concurrently, "
    "every receipt kept") {
  PartialSchema db(26);
  const auto exec = [&](const std::string& sql) {
    pqxx::connection c(db.url());
    pqxx::nontransaction(c).exec(sql);
  };
  // Retained, claimable, retrying and DEAD receipts (one DEAD discarded), all of one consumer.
  exec("INSERT INTO " + db.q("inbox_receipts") +
       " (scope_kind, source, consumer, message_id, event_type, schema_version, payload, fingerprint, status, "
       "completed_at, dead_reason, discarded_at) SELECT 'global', 's', 'c', 'm' || g, 'e', 1, '{}', repeat('a', 64), "
       "s.status, CASE WHEN s.status = 'COMPLETED' THEN now() END, CASE WHEN s.status = 'DEAD' THEN 'x' END, "
       "CASE WHEN g = 1000 THEN now() END FROM generate_series(1, 1000) g CROSS JOIN LATERAL (SELECT CASE "
       "WHEN g % 10 = 1 THEN 'PENDING' WHEN g % 10 = 2 THEN 'RETRYABLE' WHEN g % 100 = 0 THEN 'DEAD' "
       "ELSE 'COMPLETED' END AS status) AS s");
  // "absent", "plain" or "covering" (an INCLUDE clause).
  const auto definition = [&](const std::string& index) -> std::string {
    const std::string named =
        "SELECT count(*) FROM " + index_definitions_of(db.schema()) + " WHERE indexname = '" + index + "'";
    if (db.scalar(named) == 0) return "absent";
    return db.scalar(named + " AND indexdef LIKE '%INCLUDE%'") == 1 ? "covering" : "plain";
  };
  REQUIRE(definition("inbox_receipts_claimable") == "plain");
  REQUIRE(definition("inbox_receipts_dead") == "plain");

  std::vector<MigrationStep> steps;
  const auto record_step = [&](const MigrationStep& step) { steps.push_back(step); };
  // 0027-0028: the covering indexes are built beside the old ones.
  CHECK(migrate(db.url(), {.schema = db.schema(), .target_version = 28, .before_step = record_step}).applied ==
        std::vector<int>{27, 28});
  CHECK(definition("inbox_receipts_claimable") == "plain");
  CHECK(definition("inbox_receipts_claimable_covering") == "covering");
  CHECK(definition("inbox_receipts_dead_covering") == "covering");
  // 0029-0030: the old ones are dropped; the claims and the backlog figures read the new
  // ones meanwhile.
  CHECK(migrate(db.url(), {.schema = db.schema(), .target_version = 30, .before_step = record_step}).applied ==
        std::vector<int>{29, 30});
  CHECK(definition("inbox_receipts_claimable") == "absent");
  CHECK(definition("inbox_receipts_dead") == "absent");
  // 0031 on: the covering indexes carry the old names.
  CHECK(migrate(db.url(), {.schema = db.schema(), .before_step = record_step}).applied == versions_from(31));
  REQUIRE(steps.size() >= 5);
  for (std::size_t i = 0; i < 4; ++i) CHECK_FALSE(steps[i].transactional);
  CHECK(steps[4].transactional);
  CHECK(definition("inbox_receipts_claimable") == "covering");
  CHECK(definition("inbox_receipts_dead") == "covering");
  CHECK(definition("inbox_receipts_claimable_covering") == "absent");
  CHECK(definition("inbox_receipts_dead_covering") == "absent");
  CHECK(db.scalar("SELECT count(*) FROM " + index_definitions_of(db.schema()) +
                  " WHERE indexname = 'inbox_receipts_claimable' AND indexdef LIKE "
                  "'%(consumer, available_at) INCLUDE (status) WHERE (status = ANY (ARRAY[''PENDING''::text, "
                  "''RETRYABLE''::text]))'") == 1);
  CHECK(db.scalar("SELECT count(*) FROM " + index_definitions_of(db.schema()) +
                  " WHERE indexname = 'inbox_receipts_dead' AND indexdef LIKE "
                  "'%(consumer, updated_at) INCLUDE (discarded_at) WHERE (status = ''DEAD''::text)'") == 1);
  CHECK(db.scalar("SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON "
                  "n.oid = c.relnamespace WHERE n.nspname = '" +
                  db.schema() + "' AND NOT (i.indisvalid AND i.indisready)") == 0);

  // Every receipt is still there, and the counts the collector takes are index-only now.
  CHECK(db.scalar("SELECT count(*) FROM " + db.q("inbox_receipts")) == 1000);
  // Vacuumed until every page is all-visible: a snapshot of a test running beside this one
  // can keep the new rows from being visible to all for a moment.
  REQUIRE(boxcar::testing::eventually(
      [&] {
        exec("VACUUM (ANALYZE) " + db.q("inbox_receipts"));
        return db.scalar("SELECT relpages - relallvisible FROM pg_class WHERE oid = '" + db.q("inbox_receipts") +
                         "'::regclass") == 0;
      },
      60s));
  pqxx::connection c(db.url());
  pqxx::work tx(c);
  tx.exec("SET LOCAL enable_bitmapscan = off");
  tx.exec("SET LOCAL enable_seqscan = off");
  const auto plan_of = [&](const std::string& sql) {
    std::string plan;
    for (const auto& row : tx.exec("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) " + sql))
      plan += std::string(row[0].c_str()) + "\n";
    return plan;
  };
  const auto claimable = plan_of("SELECT count(*) FILTER (WHERE status = 'RETRYABLE') FROM " + db.q("inbox_receipts") +
                                 " WHERE consumer = 'c' AND status IN ('PENDING', 'RETRYABLE')");
  INFO(claimable);
  CHECK(claimable.find("Index Only Scan using inbox_receipts_claimable on") != std::string::npos);
  CHECK(claimable.find("Heap Fetches: 0") != std::string::npos);
  const auto dead = plan_of("SELECT count(*) FROM " + db.q("inbox_receipts") +
                            " WHERE consumer = 'c' AND status = 'DEAD' AND discarded_at IS NULL");
  INFO(dead);
  CHECK(dead.find("Index Only Scan using inbox_receipts_dead on") != std::string::npos);
  CHECK(dead.find("Heap Fetches: 0") != std::string::npos);
  CHECK(tx.exec1("SELECT count(*) FILTER (WHERE status = 'RETRYABLE') FROM " + db.q("inbox_receipts") +
                 " WHERE consumer = 'c' AND status IN ('PENDING', 'RETRYABLE')")[0]
            .as<int>() == 100);
  CHECK(tx.exec1("SELECT count(*) FROM " + db.q("inbox_receipts") +
                 " WHERE consumer = 'c' AND status = 'DEAD' AND discarded_at IS NULL")[0]
            .as<int>() == 9);
}

TEST_CASE("boxcar migrate accepts a schema a newer build migrated compatibly and refuses an incompatible one") {
  TestDatabase db(kMigrated);
  const int build = latest_migration_version();
  const std::string newer = std::to_string(build + 1);
  db.query("INSERT INTO {schema}.schema_migrations (version, name, checksum, compatible_with) VALUES (" + newer +
           ", 'newer.sql', repeat('a', 64), " + std::to_string(build) + ")");
  const auto run = [&](std::string* output) {
    const std::string command =
        std::string(BOXCAR_CLI_PATH) + " --database-url '" + db.url() + "' --schema " + db.schema() + " migrate 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    char buffer[4096];
    output->clear();
    while (fgets(buffer, sizeof buffer, pipe)) *output += buffer;
    return WEXITSTATUS(pclose(pipe));
  };
  std::string output;
  CHECK(run(&output) == 0);
  CHECK(output.find("is at version " + newer) != std::string::npos);
  CHECK(output.find("marked compatible") != std::string::npos);

  db.query("UPDATE {schema}.schema_migrations SET compatible_with = version WHERE version = " + newer);
  CHECK(run(&output) != 0);
  CHECK(output.find("MIGRATION_UNKNOWN_VERSION") != std::string::npos);
  CHECK(output.find("needs a Boxcar that knows migration " + newer) != std::string::npos);
}

TEST_CASE("an upgrade gives each scope its own ordering keys: receipts that waited behind another tenant run") {
  PartialSchema db(32);
  const auto exec = [&](const std::string& sql) {
    pqxx::connection c(db.url());
    pqxx::nontransaction(c).exec(sql);
  };
  // Under 0012's keys, tenant B's order 42 waits behind tenant A's DEAD head, in one key.
  const auto accept = [&](const std::string& tenant, const std::string& key, int seq) {
    exec("INSERT INTO " + db.q("inbox_receipts") +
         " (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, fingerprint, "
         "ordering_key) VALUES ('tenant', '" +
         tenant + "', 's', 'c', '" + tenant + ":" + key + "-" + std::to_string(seq) +
         "', 'e', 1, '{}', repeat('a', 64), '" + key + "')");
  };
  accept("A", "42", 0);
  accept("B", "42", 0);
  accept("A", "42", 1);
  accept("B", "42", 1);
  accept("B", "7", 0);
  exec("UPDATE " + db.q("inbox_receipts") +
       " SET status = 'DEAD', dead_reason = 'HANDLER_PERMANENT' WHERE message_id = 'A:42-0'");
  const auto status_of = [&](const std::string& message_id) {
    pqxx::connection c(db.url());
    return pqxx::nontransaction(c)
        .exec1("SELECT status FROM " + db.q("inbox_receipts") + " WHERE message_id = '" + message_id + "'")[0]
        .as<std::string>();
  };
  REQUIRE(status_of("B:42-0") == "WAITING");
  REQUIRE(db.scalar("SELECT count(*) FROM " + db.q("inbox_ordering_keys")) == 2);

  migrate(db.url(), {.schema = db.schema()});
  // Tenant B's first order-42 message heads B's own key; the rest keep their order.
  CHECK(status_of("B:42-0") == "PENDING");
  CHECK(status_of("B:42-1") == "WAITING");
  CHECK(status_of("A:42-0") == "DEAD");
  CHECK(status_of("A:42-1") == "WAITING");
  CHECK(status_of("B:7-0") == "PENDING");
  const auto head = [&](const std::string& tenant, const std::string& key) {
    pqxx::connection c(db.url());
    return pqxx::nontransaction(c)
        .exec1("SELECT r.message_id FROM " + db.q("inbox_ordering_keys") + " AS k JOIN " + db.q("inbox_receipts") +
               " AS r ON r.id = k.head_id WHERE k.scope_kind = 'tenant' AND k.scope_id = '" + tenant +
               "' AND k.ordering_key = '" + key + "'")[0]
        .as<std::string>();
  };
  CHECK(head("A", "42") == "A:42-0");
  CHECK(head("B", "42") == "B:42-0");
  CHECK(head("B", "7") == "B:7-0");
  CHECK(db.scalar("SELECT count(*) FROM " + db.q("inbox_ordering_keys")) == 3);
  // Only A's key stays blocked.
  CHECK(db.scalar("SELECT count(*) FROM " + db.q("inbox_ordering_keys") + " WHERE blocked_since IS NOT NULL") == 1);

  // B's next message comes after its waiting one, and B's head finishing promotes B's.
  accept("B", "42", 2);
  CHECK(db.scalar("SELECT count(*) FROM " + db.q("inbox_receipts") + " AS x, " + db.q("inbox_receipts") +
                  " AS y WHERE x.message_id = 'B:42-1' AND y.message_id = 'B:42-2' AND x.key_seq < y.key_seq") == 1);
  exec("UPDATE " + db.q("inbox_receipts") +
       " SET status = 'COMPLETED', completed_at = now() WHERE message_id = 'B:42-0'");
  CHECK(status_of("B:42-1") == "PENDING");
  CHECK(status_of("A:42-1") == "WAITING");
  CHECK(status_of("B:42-2") == "WAITING");
  // The waiting receipts' index is the scoped one, under its old name.
  CHECK(db.scalar("SELECT count(*) FROM " + index_definitions_of(db.schema()) +
                  " WHERE indexname = 'inbox_receipts_waiting' AND indexdef LIKE "
                  "'%(consumer, scope_kind, scope_id, ordering_key, key_seq NULLS FIRST, id)%'") == 1);
}

TEST_CASE("a key-order trigger caught mid-statement by the scoping upgrade never runs its old body on the new keys") {
  PartialSchema db(32);
  const auto exec = [&](const std::string& sql) {
    pqxx::connection c(db.url());
    pqxx::nontransaction(c).exec(sql);
  };
  // Key k of consumer c under 0012's unscoped keys: C:k-0 heads it, D's two receipts and
  // C:k-1 wait behind it, in that order.
  for (const char* id : {"C:k-0", "D:k-0", "D:k-1", "C:k-1"})
    exec("INSERT INTO " + db.q("inbox_receipts") +
         " (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, fingerprint, "
         "ordering_key) VALUES ('tenant', '" +
         std::string(1, id[0]) + "', 's', 'c', '" + id + "', 'e', 1, '{}', repeat('a', 64), 'k')");
  // Sessions waiting, directly or behind one that waits, for the holder's transaction.
  pqxx::connection holder(db.url());
  const int holder_pid = holder.backendpid();
  const auto waiting_on_locks = [&] {
    return db.scalar("WITH RECURSIVE blocked AS (SELECT pid FROM pg_stat_activity WHERE " + std::to_string(holder_pid) +
                     " = ANY (pg_blocking_pids(pid)) UNION SELECT a.pid FROM pg_stat_activity AS a JOIN blocked AS b "
                     "ON b.pid = ANY (pg_blocking_pids(a.pid))) SELECT count(*) FROM blocked");
  };

  // Hold D:k-0, which the upgrade makes the head of D's own key: the upgrade stops there,
  // holding its locks.
  pqxx::work hold(holder);
  hold.exec("SELECT 1 FROM " + db.q("inbox_receipts") + " WHERE message_id = 'D:k-0' FOR UPDATE");
  // A lock_timeout longer than the test: the upgrade's step waits, it does not start over.
  auto upgrade =
      std::async(std::launch::async, [&] { return migrate(db.url(), {.schema = db.schema(), .lock_timeout = 60s}); });
  REQUIRE(boxcar::testing::eventually([&] { return waiting_on_locks() >= 1; }, 20s));
  // A worker completes C:k-0 now: its key-order trigger lets go of the key.
  auto completion = std::async(std::launch::async, [&] {
    exec("UPDATE " + db.q("inbox_receipts") +
         " SET status = 'COMPLETED', completed_at = now() WHERE message_id = "
         "'C:k-0'");
  });
  REQUIRE(boxcar::testing::eventually([&] { return waiting_on_locks() >= 2; }, 20s));
  hold.commit();
  upgrade.get();
  completion.get();

  const auto status_of = [&](const std::string& message_id) {
    pqxx::connection c(db.url());
    return pqxx::nontransaction(c)
        .exec1("SELECT status FROM " + db.q("inbox_receipts") + " WHERE message_id = '" + message_id + "'")[0]
        .as<std::string>();
  };
  // Each tenant's key has one head, its oldest unfinished receipt; D's second one waits.
  CHECK(status_of("C:k-0") == "COMPLETED");
  CHECK(status_of("C:k-1") == "PENDING");
  CHECK(status_of("D:k-0") == "PENDING");
  CHECK(status_of("D:k-1") == "WAITING");
  CHECK(db.scalar("SELECT count(*) FROM " + db.q("inbox_ordering_keys") + " AS k JOIN " + db.q("inbox_receipts") +
                  " AS h ON h.id = k.head_id WHERE h.scope_id = k.scope_id AND h.status = 'PENDING'") == 2);
}
