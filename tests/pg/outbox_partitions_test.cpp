// Outbox time partitions and the janitor (migrations 0017-0019, ops/retention.hpp,
// ops/janitor.hpp; docs/schema.md "Outbox partitions", docs/operations.md "Janitor"):
// partitions ahead, retirement of finished old partitions only, an interrupted DETACH
// CONCURRENTLY finished by the next run, a partition a run detached and left (it died in
// between) attached again or dropped, one janitor leader per schema, the claim's plan,
// and the online migration from the unpartitioned table under live emitters and a publisher.
// Invariants are counted in rows, never read from logs or timings.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <future>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <pqxx/pqxx>

#include "boxcar/core/detail/with_schema.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/pg_array.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/uuid.hpp"
#include "boxcar/ops/janitor.hpp"
#include "boxcar/ops/retention.hpp"
#include "boxcar/outbox/errors.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/detail/named_statements.hpp"
#include "boxcar/testing/eventually.hpp"
#include "child_process.hpp"
#include "index_definitions.hpp"
#include "named_statement.hpp"
#include "notice_log.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

std::string publisher_statement(const std::string& name) { return statement_sql(detail::publisher_statements(), name); }

// The day `days` from today (UTC) as the partition bound expression.
std::string day(int days) {
  return "(pg_catalog.date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + interval '" +
         std::to_string(days) + " days')";
}

// Gives the schema partitions for the past: the first partition (empty in a fresh schema)
// is narrowed to end `from` days ago and one partition per day is attached from there to
// the first one the migration made (the day after tomorrow).
void add_past_partitions(TestDatabase& db, int from) {
  db.execute("ALTER TABLE {schema}.outbox_events DETACH PARTITION {schema}.outbox_events_legacy");
  db.execute(
      "ALTER TABLE {schema}.outbox_events ATTACH PARTITION {schema}.outbox_events_legacy FOR VALUES FROM "
      "(MINVALUE) TO ({schema}.outbox_event_id_floor(" +
      day(-from) + "))");
  for (int d = -from; d < 2; ++d) {
    const std::string name = "{schema}.outbox_events_t" + std::to_string(d + 100);
    db.execute("CREATE TABLE " + name + " (LIKE {schema}.outbox_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)");
    db.execute("ALTER TABLE {schema}.outbox_events ATTACH PARTITION " + name +
               " FOR VALUES FROM ({schema}.outbox_event_id_floor(" + day(d) + ")) TO ({schema}.outbox_event_id_floor(" +
               day(d + 1) + "))");
  }
}

// Inserts an event emitted `days` from today (noon), in `status`, finished `finished_days`
// from today, as the emitter and publisher would have left it.
void insert_event(TestDatabase& db, int days, const std::string& status, int finished_days = 0,
                  bool discarded = false) {
  static std::atomic<int> n{0};
  const std::string at = "(" + day(days) + " + interval '12 hours' + interval '" + std::to_string(++n) + " ms')";
  const std::string finished = day(finished_days);
  db.execute(
      "INSERT INTO {schema}.outbox_events (event_id, event_type, schema_version, topic, message_key, tenant_scope, "
      "tenant_id, payload, status, key_seq, claim_token, lease_expires_at, published_at, dead_reason, discarded_at, "
      "created_at) VALUES ({schema}.outbox_event_id_floor(" +
      at + "), 'thing.happened', 1, 'things', 'k" + std::to_string(n) + "', 'tenant', 't1', '{}', '" + status + "', " +
      (status == "WAITING" ? "2" : "NULL") + ", " +
      (status == "PUBLISHING" ? "gen_random_uuid(), now() + interval '1 minute'" : "NULL, NULL") + ", " +
      (status == "PUBLISHED" ? finished : "NULL") + ", " + (status == "DEAD" ? "'ATTEMPTS_EXHAUSTED'" : "NULL") + ", " +
      (discarded ? finished : "NULL") + ", " + at + ")");
}

// Inserts `count` PUBLISHED events, one every `seconds_apart` seconds from the start of the
// day `from_day` days from today: the history old partitions hold.
void insert_published(TestDatabase& db, int from_day, int seconds_apart, int count) {
  db.execute(
      "INSERT INTO {schema}.outbox_events (event_id, event_type, schema_version, topic, message_key, tenant_scope, "
      "tenant_id, payload, status, published_at) "
      "SELECT {schema}.outbox_event_id_floor(" +
      day(from_day) + " + i * interval '" + std::to_string(seconds_apart) +
      " seconds'), 'thing.happened', 1, 'things', 'k', 'tenant', 't1', '{}', 'PUBLISHED', now() "
      "FROM generate_series(0, " +
      std::to_string(count) + " - 1) AS i");
}

// The line of `plan` that scans `partition` (a table of the outbox partitioned by day:
// outbox_events_tNN), under the alias `alias` (e_N, an UPDATE's target) when given, or "".
std::string scan_line(const std::string& plan, const std::string& partition, const std::string& alias = "") {
  const std::string target = "on " + partition + " " + (alias.empty() ? "" : alias + "_");
  std::size_t start = 0;
  while (start < plan.size()) {
    const auto end = std::min(plan.find('\n', start), plan.size());
    const auto line = plan.substr(start, end - start);
    if (line.find("Scan") != std::string::npos && line.find(target) != std::string::npos) return line;
    start = end + 1;
  }
  return {};
}

std::int64_t partitions(TestDatabase& db) {
  return db.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = '{schema}.outbox_events'::regclass");
}

bool partition_exists(TestDatabase& db, int days) {
  return db.scalar(
             "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
             "WHERE n.nspname = '" +
             db.schema() + "' AND c.relname = 'outbox_events_t" + std::to_string(days + 100) + "'") == 1;
}

}  // namespace

TEST_CASE("outbox partitions cover seven days ahead after migrating and the run creates more when asked") {
  TestDatabase db;
  // The migration's: through the end of the 8th UTC day from today.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_partitions('{schema}.outbox_events'::regclass) "
                  "WHERE ends_at = " +
                  day(8)) == 1);
  const auto before = partitions(db);
  pqxx::connection session(db.url());
  const auto report = run_retention(session, db.schema(), {.partitions_ahead = 10});
  CHECK(report.outbox_partitions_created == 3);  // the 9th, 10th and 11th day from today
  CHECK(partitions(db) == before + 3);
  CHECK(run_retention(session, db.schema(), {.partitions_ahead = 10}).outbox_partitions_created == 0);
}

TEST_CASE("an emit that finds no outbox partition fails with OUTBOX_PARTITION_MISSING and writes nothing") {
  TestDatabase db;
  auto pool = db.pool(2);
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false});
  const auto emit = [&] {
    Tx tx = pool->begin();
    outbox.emit(tx, OutboxMessage{.event_type = "thing.happened", .schema_version = 1, .topic = "things"},
                {.scope = Scope::tenant("t1"), .key = "a", .ordered = true});
    tx.commit();
  };
  // Today's ids fall in the first partition: without it, nothing covers them.
  db.execute("ALTER TABLE {schema}.outbox_events DETACH PARTITION {schema}.outbox_events_legacy");
  std::string code;
  try {
    emit();
  } catch (const Error& e) {
    code = e.code();
    CHECK_THAT(std::string(e.what()), Catch::Contains("janitor"));
  }
  CHECK(code == "OUTBOX_PARTITION_MISSING");
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_ordering_keys") == 0);  // the key's entry rolled back too
  db.execute(
      "ALTER TABLE {schema}.outbox_events ATTACH PARTITION {schema}.outbox_events_legacy FOR VALUES FROM (MINVALUE) "
      "TO ({schema}.outbox_event_id_floor(" +
      day(2) + "))");
  CHECK_NOTHROW(emit());
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING'") == 1);
}

TEST_CASE("only old outbox partitions whose every event is finished are detached and dropped") {
  TestDatabase db;
  add_past_partitions(db, 12);
  // 10 days ago: all finished 9 days ago, one DEAD and discarded.
  for (int i = 0; i < 3; ++i) insert_event(db, -10, "PUBLISHED", -9);
  insert_event(db, -10, "DEAD", -9, true);
  // 9 days ago: one DEAD not discarded. 8: PENDING. 7: WAITING. 6: PUBLISHING and RETRYABLE.
  insert_event(db, -9, "PUBLISHED", -9);
  insert_event(db, -9, "DEAD");
  insert_event(db, -8, "PUBLISHED", -8);
  insert_event(db, -8, "PENDING");
  insert_event(db, -7, "WAITING");
  insert_event(db, -6, "PUBLISHING");
  insert_event(db, -11, "RETRYABLE");
  // 5 days ago: all PUBLISHED, but 1 day ago: past the partition's range, not its events.
  insert_event(db, -5, "PUBLISHED", -1);
  // 3 days ago: finished, but the partition is younger than the retention.
  insert_event(db, -3, "PUBLISHED", -3);
  const auto events = db.scalar("SELECT count(*) FROM {schema}.outbox_events");
  const PurgeOptions options{.outbox_retention = 24h * 4};
  pqxx::connection session(db.url());

  const auto planned = run_retention(session, db.schema(), {.outbox_retention = 24h * 4, .dry_run = true});
  // Past retention (ending 4 days ago or earlier): the first partition and -12 (both empty),
  // -10 (finished); -11, -9 ... -5 blocked.
  CHECK(planned.outbox_partitions_retired == 3);
  CHECK(planned.outbox_deleted == 4);
  CHECK(planned.outbox_partitions_blocked == 6);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == events);

  const auto report = run_retention(session, db.schema(), options);
  CHECK(report.outbox_partitions_retired == 3);
  CHECK(report.outbox_deleted == 4);
  CHECK(report.outbox_partitions_blocked == 6);
  CHECK_FALSE(partition_exists(db, -10));
  CHECK_FALSE(partition_exists(db, -12));
  for (int kept : {-11, -9, -8, -7, -6, -5, -4, -3, -2, -1, 0, 1}) {
    INFO("partition of day " << kept);
    CHECK(partition_exists(db, kept));
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == events - 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status <> 'PUBLISHED'") == 5);
  CHECK(
      db.scalar(
          "SELECT count(*) FROM pg_inherits WHERE inhdetachpending AND inhparent = '{schema}.outbox_events'::regclass") ==
      0);

  // Once the blocking event of -9 is discarded, the next run retires that partition too.
  db.execute("UPDATE {schema}.outbox_events SET discarded_at = now() - interval '5 days' WHERE status = 'DEAD'");
  const auto again = run_retention(session, db.schema(), options);
  CHECK(again.outbox_partitions_retired == 1);
  CHECK_FALSE(partition_exists(db, -9));
}

TEST_CASE("an interrupted DETACH PARTITION CONCURRENTLY is finalized and dropped by the next run") {
  TestDatabase db;
  add_past_partitions(db, 10);
  insert_event(db, -10, "PUBLISHED", -10);
  // A transaction that started before the detach keeps its second phase waiting...
  pqxx::connection reader(db.url());
  pqxx::work snapshot(reader);
  snapshot.exec(db.qualified("SELECT count(*) FROM {schema}.outbox_events"));
  pqxx::connection detacher(db.url());
  const auto pid = detacher.backendpid();
  auto detach = std::async(std::launch::async, [&] {
    try {
      pqxx::nontransaction(detacher).exec(
          db.qualified("ALTER TABLE {schema}.outbox_events DETACH PARTITION {schema}.outbox_events_t90 CONCURRENTLY"));
    } catch (const std::exception&) {
    }
  });
  REQUIRE(eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM pg_inherits WHERE inhdetachpending AND inhparent = '{schema}.outbox_events'::regclass") ==
               1;
      },
      10s));
  // ...and the detaching session dies in it.
  db.scalar("SELECT count(*) FROM (SELECT pg_terminate_backend(" + std::to_string(pid) + ")) AS t");
  REQUIRE(detach.wait_for(10s) == std::future_status::ready);
  snapshot.abort();
  CHECK(
      db.scalar(
          "SELECT count(*) FROM pg_inherits WHERE inhdetachpending AND inhparent = '{schema}.outbox_events'::regclass") ==
      1);

  pqxx::connection session(db.url());
  const auto report = run_retention(session, db.schema(), {.outbox_retention = 24h * 2});
  CHECK(report.outbox_partitions_retired >= 1);
  CHECK_FALSE(partition_exists(db, -10));
  CHECK(
      db.scalar(
          "SELECT count(*) FROM pg_inherits WHERE inhdetachpending AND inhparent = '{schema}.outbox_events'::regclass") ==
      0);
}

namespace {

// The bound of the partition of day `days` (outbox_events_tNN), as ATTACH PARTITION takes it.
std::string bound_of(TestDatabase& db, int days) {
  return db
      .query("SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = '{schema}.outbox_events_t" +
             std::to_string(days + 100) + "'::regclass")[0][0]
      .as<std::string>();
}

bool attached(TestDatabase& db, int days) {
  return db.scalar(
             "SELECT count(*) FROM pg_inherits WHERE inhparent = '{schema}.outbox_events'::regclass "
             "AND inhrelid = '{schema}.outbox_events_t" +
             std::to_string(days + 100) + "'::regclass") == 1;
}

// What a retention run that ended right after its DETACH leaves (retention.cpp marks a
// partition with its bound before detaching it; the mark is stored in the catalog, so
// its text is pinned here).
void leave_detached_by_retention(TestDatabase& db, int days) {
  const std::string table = "{schema}.outbox_events_t" + std::to_string(days + 100);
  auto conn = db.connect();
  pqxx::nontransaction n(conn);
  n.exec(db.qualified("COMMENT ON TABLE " + table + " IS " +
                      n.quote("boxcar retention: detaching from outbox_events, " + bound_of(db, days))));
  n.exec(db.qualified("ALTER TABLE {schema}.outbox_events DETACH PARTITION " + table + " CONCURRENTLY"));
}

}  // namespace

TEST_CASE("a partition a retention run detached and left with an unfinished event is attached again by the next run") {
  TestDatabase db;
  add_past_partitions(db, 10);
  insert_event(db, -10, "PUBLISHED", -10);
  insert_event(db, -10, "PENDING");
  leave_detached_by_retention(db, -10);
  REQUIRE_FALSE(attached(db, -10));
  // Detached, its PENDING event is in no partition a publisher claims from.
  REQUIRE(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING'") == 0);
  pqxx::connection session(db.url());

  const auto planned = run_retention(session, db.schema(), {.outbox_retention = 24h * 2, .dry_run = true});
  CHECK(planned.outbox_partitions_reattached == 1);
  CHECK_FALSE(attached(db, -10));

  const auto report = run_retention(session, db.schema(), {.outbox_retention = 24h * 2});
  CHECK(report.outbox_partitions_reattached == 1);
  CHECK(attached(db, -10));
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING'") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 2);
  // Its mark is gone with the detach it recorded; the partition is blocked like any other
  // past retention with an unfinished event, and stays.
  CHECK(db.scalar("SELECT count(*) FROM pg_description WHERE objoid = '{schema}.outbox_events_t90'::regclass") == 0);
  const auto again = run_retention(session, db.schema(), {.outbox_retention = 24h * 2});
  CHECK(again.outbox_partitions_reattached == 0);
  CHECK(again.outbox_partitions_blocked >= 1);
  CHECK(attached(db, -10));
}

TEST_CASE(
    "a partition a retention run detached and left with every event finished is dropped by the next run, and a "
    "table detached by someone else is left alone") {
  TestDatabase db;
  add_past_partitions(db, 10);
  insert_event(db, -10, "PUBLISHED", -10);
  insert_event(db, -9, "PENDING");
  leave_detached_by_retention(db, -10);
  // An operator's own detach (say, to archive the day): no retention mark.
  db.execute("ALTER TABLE {schema}.outbox_events DETACH PARTITION {schema}.outbox_events_t91");
  pqxx::connection session(db.url());

  const auto report = run_retention(session, db.schema(), {.outbox_retention = 24h * 2});
  CHECK(report.outbox_partitions_reattached == 0);
  CHECK_FALSE(partition_exists(db, -10));
  CHECK(partition_exists(db, -9));
  CHECK_FALSE(attached(db, -9));
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events_t91 WHERE status = 'PENDING'") == 1);
}

// Run by ctest through tests/chaos/with_failpoints.sh (a fault test), which names the
// failpoint build's CLI in BOXCAR_FAILPOINT_CLI; hidden from the pg label.
TEST_CASE("a retention run killed between DETACH and a needed re-ATTACH leaves a partition the next run attaches again",
          "[.failpoint]") {
  const char* cli = std::getenv("BOXCAR_FAILPOINT_CLI");
  REQUIRE(cli);
  TestDatabase db;
  add_past_partitions(db, 10);
  // The first partition (before day -10) is kept for its unfinished event: the partition
  // of day -10 is the run's first DETACH, and the failpoint's first hit.
  insert_event(db, -11, "RETRYABLE");
  insert_event(db, -10, "PUBLISHED", -10);
  // An operator requeues the event (`dead retry`, say) in a transaction that the purge's
  // first check does not see and that its DETACH ... CONCURRENTLY waits for: after the
  // detach the event is unfinished, and the run would attach the table again...
  pqxx::connection operator_session(db.url());
  pqxx::work requeue(operator_session);
  requeue.exec(db.qualified(
      "UPDATE {schema}.outbox_events SET status = 'PENDING', published_at = NULL WHERE status = 'PUBLISHED'"));
  ChildProcess purge(cli, {"purge", "--outbox-days", "2"},
                     {"BOXCAR_DATABASE_URL=" + db.url(), "BOXCAR_SCHEMA=" + db.schema(),
                      "BOXCAR_FAILPOINT=retention.after_detach:kill"});
  REQUIRE(eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM pg_inherits WHERE inhdetachpending AND inhparent = '{schema}.outbox_events'::regclass") ==
               1;
      },
      30s));
  requeue.commit();
  // ...but it is killed right after the DETACH.
  const auto status = purge.wait(30s);
  INFO(purge.output());
  REQUIRE(status == 128 + SIGKILL);
  REQUIRE(partition_exists(db, -10));
  REQUIRE_FALSE(attached(db, -10));
  REQUIRE(db.scalar("SELECT count(*) FROM {schema}.outbox_events_t90 WHERE status = 'PENDING'") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING'") == 0);

  Janitor janitor({.connection_string = db.url(), .schema = db.schema(), .retention = {.outbox_retention = 24h * 2}});
  const auto report = janitor.run_once();
  REQUIRE(report);
  CHECK(report->outbox_partitions_reattached == 1);
  CHECK(attached(db, -10));
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING'") == 1);
}

TEST_CASE("of two janitors one leads, and the other takes over when the leader's session dies") {
  TestDatabase db;
  const JanitorOptions options{.connection_string = db.url(), .schema = db.schema(), .interval = 100ms};
  Janitor a(options);
  Janitor b(options);
  const auto ran_a = a.run_once();
  const auto ran_b = b.run_once();
  CHECK(static_cast<int>(a.leader()) + static_cast<int>(b.leader()) == 1);
  CHECK(static_cast<int>(ran_a.has_value()) + static_cast<int>(ran_b.has_value()) == 1);
  Janitor& leader = a.leader() ? a : b;
  Janitor& other = a.leader() ? b : a;
  // Running again changes nothing: the lock stays where it is.
  other.run_once();
  leader.run_once();
  CHECK(leader.leader());
  CHECK_FALSE(other.leader());

  db.scalar("SELECT count(*) FROM (SELECT pg_terminate_backend(" + std::to_string(leader.backend_pid()) + ")) AS t");
  CHECK(eventually(
      [&] {
        other.run_once();
        return other.leader();
      },
      10s));
  // The old leader notices its lost session, reconnects and stays a follower.
  leader.run_once();
  leader.run_once();
  CHECK_FALSE(leader.leader());
  CHECK(static_cast<int>(a.leader()) + static_cast<int>(b.leader()) == 1);

  // Stopping the leader frees the lock at once.
  other.stop();
  CHECK(eventually(
      [&] {
        leader.run_once();
        return leader.leader();
      },
      10s));
}

TEST_CASE(
    "the publisher's claim on the partitioned outbox scans indexes, no old partition sequentially, and updates each "
    "event in its own partition only") {
  TestDatabase db;
  add_past_partitions(db, 4);
  // 28,800 published events a day (one every 3 s) for the last four days, one PENDING today.
  insert_published(db, -4, 3, 4 * 28800);
  insert_event(db, 0, "PENDING");
  db.execute("ANALYZE {schema}.outbox_events");
  std::string claim = db.qualified(publisher_statement("publisher.claim"));
  const std::vector<std::pair<std::string, std::string>> parameters = {
      {"$1", "100"}, {"$2", "'" + uuid_v7() + "'"}, {"$3", "30000"}, {"$4", "1099511627776"}, {"$5", "true"}};
  for (const auto& [name, value] : parameters)
    for (auto at = claim.find(name); at != std::string::npos; at = claim.find(name)) claim.replace(at, 2, value);
  // Run, so that the plan shows which partitions the update's lookup visited.
  std::vector<std::string> lines;
  for (const auto& row : db.query("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + claim))
    lines.emplace_back(row[0].c_str());
  std::string plan;
  for (const auto& line : lines) plan += line + "\n";
  INFO(plan);
  // The due scan goes through each old partition's index (outbox_events_due's copies);
  // only empty partitions may be "scanned" sequentially, which reads nothing.
  for (int d = -4; d < 0; ++d)
    CHECK_THAT(plan, !Catch::Contains("Seq Scan on outbox_events_t" + std::to_string(d + 100)));
  CHECK_THAT(plan, Catch::Contains("available_at_id_status_created_at_idx on outbox_events_t96"));
  // The update (alias e_N) finds the claimed event by its partition key: the nested loop
  // prunes at run time to today's partition, which holds it; the old ones are never probed.
  const auto update_line = [&](int partition) {
    const std::string target = "on outbox_events_t" + std::to_string(partition) + " e_";
    const auto it = std::find_if(lines.begin(), lines.end(), [&](const std::string& line) {
      return line.find("Scan") != std::string::npos && line.find(target) != std::string::npos;
    });
    return it == lines.end() ? std::string() : *it;
  };
  for (int partition = 96; partition < 100; ++partition) {
    INFO("partition t" << partition);
    CHECK_THAT(update_line(partition), Catch::Contains("never executed"));
  }
  CHECK_THAT(update_line(100), Catch::Contains("loops=1)"));
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHING'") == 1);
}

TEST_CASE("the publisher's marks find a batch through its partition's event_id index, not every lease") {
  TestDatabase db;
  add_past_partitions(db, 2);
  // Since yesterday, an event every 4 s, all published, and today's batch in flight, which
  // ANALYZE does not see: claims live for milliseconds.
  insert_published(db, -1, 4, 2 * 21600);
  db.execute("ANALYZE {schema}.outbox_events");
  insert_event(db, 0, "PUBLISHING");
  insert_event(db, 0, "PUBLISHING");
  std::vector<std::string> event_ids;
  for (const auto& row :
       db.query("SELECT event_id FROM {schema}.outbox_events WHERE status = 'PUBLISHING' ORDER BY event_id"))
    event_ids.emplace_back(row[0].c_str());
  REQUIRE(event_ids.size() == 2);
  const std::string batch = "'{" + event_ids[0] + "," + event_ids[1] + "}'";
  const std::string token = "'" + uuid_v7() + "'";
  const std::string range = "'" + event_ids.front() + "', '" + event_ids.back() + "'";
  const std::vector<std::pair<std::string, std::string>> statements = {
      {"publisher.mark_published", batch + ", " + token + ", " + range},
      {"publisher.mark_failed", batch + ", " + token + ", 'broker down', 100, 1000, 0, false, 0, " + range},
      {"publisher.mark_refused", batch + ", " + token + ", '{no,no}', 'TOPIC_NOT_ALLOWED', " + range},
  };
  auto conn = db.connect();
  pqxx::nontransaction n(conn);
  // The first execution's custom plan prunes at planning; a generic plan (the plan cache's
  // choice once the retained partitions make it the cheaper one) prunes by the event id
  // range as the executor starts, so neither scans an old partition's index.
  for (const char* mode : {"auto", "force_generic_plan"}) {
    n.exec(std::string("SET plan_cache_mode = ") + mode);
    for (const auto& [name, arguments] : statements) {
      const auto plan = explain_prepared(n, db.qualified(publisher_statement(name)), arguments);
      INFO(mode << ", " << name << ":\n" << plan);
      CHECK_THAT(plan, Catch::Contains("Index Scan using outbox_events_t100_event_id_key"));
      CHECK_THAT(plan, !Catch::Contains("lease_expires_at_idx"));
      for (const char* old : {"outbox_events_t99", "outbox_events_t98", "outbox_events_legacy"})
        CHECK(scan_line(plan, old).empty());
    }
  }
}

TEST_CASE(
    "a key's next ordered event is promoted in its own partition only, by the mark of its head and by the delete of "
    "it") {
  TestDatabase db;
  add_past_partitions(db, 4);
  // 2,880 published events a day (one every 30 s) in each of the four old partitions.
  insert_published(db, -4, 30, 4 * 2880);
  // Three ordered events of one key, emitted now (today's partition, t100): a head and two
  // WAITING behind it.
  auto pool = db.pool(2);
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false});
  for (int n = 0; n < 3; ++n) {
    Tx tx = pool->begin();
    outbox.emit(tx, OutboxMessage{.event_type = "thing.happened", .schema_version = 1, .topic = "things"},
                {.scope = Scope::tenant("t1"), .key = "a", .ordered = true});
    tx.commit();
  }
  db.execute("ANALYZE {schema}.outbox_events");
  std::vector<std::string> key_events;
  for (const auto& row :
       db.query("SELECT event_id FROM {schema}.outbox_events WHERE message_key = 'a' ORDER BY key_seq"))
    key_events.emplace_back(row[0].c_str());
  REQUIRE(key_events.size() == 3);
  const auto status_of = [&](const std::string& event_id) {
    return db.query("SELECT status FROM {schema}.outbox_events WHERE event_id = '" + event_id + "'")[0][0]
        .as<std::string>();
  };
  REQUIRE(status_of(key_events[0]) == "PENDING");
  REQUIRE(status_of(key_events[1]) == "WAITING");

  // The plans of the statements the key-order triggers run, as this session's notices.
  auto conn = db.connect();
  NoticeLog log(conn);
  explain_nested_statements(conn);
  pqxx::nontransaction n(conn);

  // The head published (as the publisher's mark does): the statement trigger promotes the
  // next event. Its update's nested loop finds it by event_id, pruned at run time to
  // today's partition; the four old ones and the first one are never probed.
  n.exec(
      db.qualified("UPDATE {schema}.outbox_events SET status = 'PUBLISHED', published_at = now() WHERE event_id = '" +
                   key_events[0] + "'"));
  CHECK(status_of(key_events[1]) == "PENDING");
  CHECK(status_of(key_events[2]) == "WAITING");
  const auto promotion = log.plan_of("SET status = 'PENDING'");
  INFO("the statement trigger's promotion:\n" << promotion);
  REQUIRE_FALSE(promotion.empty());
  for (int partition = 96; partition < 100; ++partition) {
    INFO("partition t" << partition);
    CHECK_THAT(scan_line(promotion, "outbox_events_t" + std::to_string(partition), "e"),
               Catch::Contains("never executed"));
  }
  CHECK_THAT(scan_line(promotion, "outbox_events_legacy", "e"), Catch::Contains("never executed"));
  CHECK_THAT(scan_line(promotion, "outbox_events_t100", "e"), Catch::Contains("loops=1)"));

  // The new head deleted while unfinished: the row trigger promotes the last one, by
  // event_id too, so the plan holds today's partition alone.
  log.notices.clear();
  n.exec(db.qualified("DELETE FROM {schema}.outbox_events WHERE event_id = '" + key_events[1] + "'"));
  CHECK(status_of(key_events[2]) == "PENDING");
  const auto deleted = log.plan_of("WHERE event_id = next_event_id");
  INFO("the row trigger's promotion:\n" << deleted);
  REQUIRE_FALSE(deleted.empty());
  CHECK_THAT(deleted, Catch::Contains("outbox_events_t100"));
  for (int partition = 96; partition < 100; ++partition)
    CHECK_THAT(deleted, !Catch::Contains("outbox_events_t" + std::to_string(partition)));
  CHECK_THAT(deleted, !Catch::Contains("outbox_events_legacy"));

  // Replaced by 0022, both still run with the search_path 0013 pinned.
  for (const char* function : {"outbox_key_order_leave_all", "outbox_key_order_leave"}) {
    INFO(function);
    CHECK(db.scalar("SELECT count(*) FROM pg_proc p JOIN pg_namespace s ON s.oid = p.pronamespace "
                    "WHERE s.nspname = '" +
                    db.schema() + "' AND p.proname = '" + function +
                    "' AND p.proconfig = ARRAY['search_path=pg_catalog, ' || quote_ident(s.nspname) || ', pg_temp']") ==
          1);
  }
}

namespace {

// A schema at `version`, dropped at the end: the installation an upgrade migrates.
struct OldSchema {
  std::string url = database_url();
  std::string schema = "bx_parts_" + std::to_string(std::random_device{}() % 1000000);
  explicit OldSchema(int version) { migrate(url, {.schema = schema, .target_version = version}); }
  ~OldSchema() {
    try {
      pqxx::connection c(url);
      pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema) + " CASCADE");
    } catch (...) {
    }
  }
  std::int64_t scalar(const std::string& sql) const {
    pqxx::connection c(url);
    return pqxx::nontransaction(c).exec1(detail::with_schema(sql, schema))[0].as<std::int64_t>();
  }
  void execute(const std::string& sql) const {
    pqxx::connection c(url);
    pqxx::nontransaction(c).exec(detail::with_schema(sql, schema));
  }
};

}  // namespace

TEST_CASE(
    "the outbox becomes partitioned online: emitters and a publisher run through it and every event is "
    "published once, in key order") {
  OldSchema old(16);
  auto pool = ConnectionPool::create({.url = old.url, .size = 6});
  OutboxEmitter outbox(pool, {.schema = old.schema, .notify = false});
  // Before: rows in every status, ordered keys with WAITING events among them.
  const auto emit = [&](const std::string& key, int n) {
    Tx tx = pool->begin();
    outbox.emit(
        tx,
        OutboxMessage{.event_type = "thing.happened", .schema_version = 1, .topic = "things", .payload = {{"n", n}}},
        {.scope = Scope::tenant("t1"), .key = key, .ordered = true});
    tx.commit();
  };
  for (int n = 0; n < 5; ++n)
    for (const char* key : {"a", "b", "c"}) emit(key, n);
  old.execute(
      "UPDATE {schema}.outbox_events SET status = 'PUBLISHED', published_at = now() WHERE message_key = 'c' AND "
      "key_seq = 1");
  old.execute(
      "INSERT INTO {schema}.outbox_events (event_id, event_type, schema_version, topic, message_key, tenant_scope, "
      "tenant_id, payload, status, dead_reason) VALUES ('" +
      uuid_v7() + "', 'thing.happened', 1, 'things', 'z', 'tenant', 't1', '{\"n\": 0}', 'DEAD', 'ATTEMPTS_EXHAUSTED')");
  old.execute(
      "UPDATE {schema}.outbox_events SET status = 'RETRYABLE', attempts = 1, available_at = now() WHERE "
      "message_key = 'b' AND key_seq = 1");
  old.execute(
      "UPDATE {schema}.outbox_events SET status = 'PUBLISHING', claim_token = gen_random_uuid(), lease_expires_at = "
      "now() - interval '1 second' WHERE message_key = 'a' AND key_seq = 1");
  REQUIRE(old.scalar("SELECT count(DISTINCT status) FROM {schema}.outbox_events") == 6);

  // During: three emitters (one key each) and a publisher running the publisher's statements.
  std::atomic<bool> stop{false};
  std::atomic<long long> slowest_emit_ms{0};
  std::vector<std::future<int>> emitters;
  for (const char* key : {"a", "b", "d"})
    emitters.push_back(std::async(std::launch::async, [&, key = std::string(key)] {
      int n = 5;
      while (!stop) {
        const auto started = std::chrono::steady_clock::now();
        for (;;) {
          try {
            emit(key, n);
            break;
          } catch (const OutboxPartitionMissingError&) {
            std::this_thread::sleep_for(10ms);  // cannot happen here: counted below as lost
          }
        }
        const auto ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started).count();
        if (ms > slowest_emit_ms) slowest_emit_ms = ms;
        ++n;
      }
      return n;
    }));
  std::mutex published_mutex;
  std::map<std::string, std::vector<int>> published;
  std::multiset<std::int64_t> published_ids;
  const auto publish_round = [&](pqxx::connection& c) {
    const std::string token = uuid_v7();
    std::vector<std::int64_t> ids;
    std::vector<std::string> event_ids;
    std::vector<std::pair<std::string, int>> claimed;
    pqxx::nontransaction(c).exec_params(
        detail::with_schema(publisher_statement("publisher.recover_expired"), old.schema), 100LL, 0, 0LL);
    for (const auto& row :
         pqxx::nontransaction(c).exec_params(detail::with_schema(publisher_statement("publisher.claim"), old.schema),
                                             100LL, token, 30000LL, 1LL << 40, true)) {
      ids.push_back(row["id"].as<std::int64_t>());
      event_ids.push_back(row["event_id"].as<std::string>());
      claimed.emplace_back(row["message_key"].as<std::string>(),
                           nlohmann::json::parse(row["payload"].as<std::string>()).at("n").get<int>());
    }
    if (ids.empty()) return 0;
    const auto marked =
        pqxx::nontransaction(c)
            .exec_params(detail::with_schema(publisher_statement("publisher.mark_published"), old.schema),
                         pg_array(event_ids), token, *std::min_element(event_ids.begin(), event_ids.end()),
                         *std::max_element(event_ids.begin(), event_ids.end()))
            .affected_rows();
    std::lock_guard lock(published_mutex);
    if (marked == ids.size()) {
      for (const auto& [key, n] : claimed) published[key].push_back(n);
      published_ids.insert(ids.begin(), ids.end());
    }
    return static_cast<int>(ids.size());
  };
  auto publisher = std::async(std::launch::async, [&] {
    pqxx::connection c(old.url);
    while (!stop) {
      try {
        if (publish_round(c) == 0) std::this_thread::sleep_for(5ms);
      } catch (const pqxx::broken_connection&) {
        throw;
      } catch (const pqxx::sql_error&) {
        // A statement that ran into the swap's instant (lock_timeout of none: it waits);
        // anything else fails the test through the counts below.
      }
    }
  });

  std::this_thread::sleep_for(300ms);
  const auto report = migrate(old.url, {.schema = old.schema});
  CHECK(report.version == latest_migration_version());
  std::this_thread::sleep_for(300ms);
  stop = true;
  std::map<std::string, int> emitted_until{{"a", 0}, {"b", 0}, {"d", 0}};
  int i = 0;
  for (const char* key : {"a", "b", "d"}) emitted_until[key] = emitters[static_cast<std::size_t>(i++)].get();
  publisher.get();

  // After: the table is partitioned, and the publisher drains what is left.
  CHECK(old.scalar("SELECT count(*) FROM pg_partitioned_table WHERE partrelid = '{schema}.outbox_events'::regclass") ==
        1);
  {
    pqxx::connection c(old.url);
    while (publish_round(c) > 0) {
    }
  }
  // Nothing lost, nothing twice: every event but the DEAD one is PUBLISHED, each once.
  const auto total = old.scalar("SELECT count(*) FROM {schema}.outbox_events");
  CHECK(total == 15 + 1 + (emitted_until["a"] - 5) + (emitted_until["b"] - 5) + emitted_until["d"] - 5);
  CHECK(old.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status <> 'PUBLISHED'") == 1);
  CHECK(static_cast<std::int64_t>(published_ids.size()) == total - 2);  // less DEAD and the one published before
  CHECK(std::set<std::int64_t>(published_ids.begin(), published_ids.end()).size() == published_ids.size());
  // Per key, in emit order.
  for (const auto& [key, ns] : published) {
    INFO("key " << key);
    CHECK(std::is_sorted(ns.begin(), ns.end()));
    const int first = key == "c" ? 1 : key == "d" ? 5 : 0;
    CHECK(ns.size() == static_cast<std::size_t>((key == "c" ? 5 : emitted_until[key]) - first));
  }
  CHECK(old.scalar("SELECT count(*) FROM {schema}.outbox_ordering_keys") == 0);
  // Liveness: no emit waited anywhere near the bound for the swap's instant.
  CHECK(slowest_emit_ms < 10000);
  INFO("slowest emit " << slowest_emit_ms << " ms");
}

namespace {

// Per covering parent index (0023-0025): whether it is valid, how many partition indexes
// are attached to it, and how many partitions the outbox has.
struct CoveringState {
  bool due_valid = false;
  bool leases_valid = false;
  std::int64_t due_attached = 0;
  std::int64_t leases_attached = 0;
};

CoveringState covering_state(const OldSchema& s) {
  const auto valid = [&](const std::string& index) {
    return s.scalar("SELECT count(*) FROM pg_index WHERE indisvalid AND indexrelid = '{schema}." + index +
                    "'::regclass") == 1;
  };
  const auto attached = [&](const std::string& index) {
    return s.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = '{schema}." + index + "'::regclass");
  };
  return {.due_valid = valid("outbox_events_due_covering_all"),
          .leases_valid = valid("outbox_events_leases_covering_all"),
          .due_attached = attached("outbox_events_due_covering_all"),
          .leases_attached = attached("outbox_events_leases_covering_all")};
}

}  // namespace

TEST_CASE(
    "the outbox's covering indexes are built on each partition with rows concurrently, on empty ones at once, and "
    "replace the old due and lease indexes, passing over a partition whose detach is pending") {
  OldSchema old(22);
  // History in the first partition and in an old day's partition attached by hand, which
  // has rows too: both need a concurrent build.
  old.execute(
      "INSERT INTO {schema}.outbox_events (event_id, event_type, schema_version, topic, message_key, tenant_scope, "
      "tenant_id, payload, status, claim_token, lease_expires_at, published_at, created_at) "
      "SELECT {schema}.outbox_event_id_floor(now() - interval '3 days' + i * interval '1 ms'), 'thing.happened', 1, "
      "'things', 'k' || i, 'tenant', 't1', '{}', s.status, "
      "CASE WHEN s.status = 'PUBLISHING' THEN gen_random_uuid() END, "
      "CASE WHEN s.status = 'PUBLISHING' THEN now() + interval '1 minute' END, "
      "CASE WHEN s.status = 'PUBLISHED' THEN now() END, now() - interval '1 hour' + i * interval '1 ms' "
      "FROM generate_series(1, 3000) AS i "
      "CROSS JOIN LATERAL (SELECT CASE i % 3 WHEN 0 THEN 'PUBLISHED' WHEN 1 THEN 'PENDING' ELSE 'PUBLISHING' END "
      "AS status) AS s");
  const std::int64_t partitions_at_22 =
      old.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = '{schema}.outbox_events'::regclass");
  REQUIRE(partitions_at_22 >= 7);
  // A DETACH ... CONCURRENTLY of a partition (the janitor's of an old one, in production)
  // was interrupted: it stays in pg_inherits, detach pending, and PostgreSQL attaches no
  // index of it to a parent index.
  {
    pqxx::connection reader(old.url);
    pqxx::work snapshot(reader);
    snapshot.exec(detail::with_schema("SELECT count(*) FROM {schema}.outbox_events", old.schema));
    // (Not inside a DO block: DETACH ... CONCURRENTLY refuses to run in a transaction.)
    pqxx::connection detacher(old.url);
    const auto pid = detacher.backendpid();
    const std::string oldest_daily =
        pqxx::nontransaction(detacher)
            .exec1(detail::with_schema("SELECT min(partition_name) FROM {schema}.outbox_partitions("
                                       "'{schema}.outbox_events') WHERE partition_name LIKE 'outbox_events_p%'",
                                       old.schema))[0]
            .as<std::string>();
    auto detach = std::async(std::launch::async, [&] {
      try {
        pqxx::nontransaction(detacher).exec(detail::with_schema(
            "ALTER TABLE {schema}.outbox_events DETACH PARTITION {schema}." + oldest_daily + " CONCURRENTLY",
            old.schema));
      } catch (const std::exception&) {
      }
    });
    const std::string pending =
        "SELECT count(*) FROM pg_inherits WHERE inhdetachpending AND inhparent = '{schema}.outbox_events'::regclass";
    REQUIRE(eventually([&] { return old.scalar(pending) == 1; }, 10s));
    old.scalar("SELECT count(*) FROM (SELECT pg_terminate_backend(" + std::to_string(pid) + ")) AS t");
    REQUIRE(detach.wait_for(10s) == std::future_status::ready);
    snapshot.abort();
    REQUIRE(old.scalar(pending) == 1);
  }

  migrate(old.url, {.schema = old.schema, .target_version = 23});
  // 0023: the parents exist, INVALID, with every empty partition's index attached: all but
  // the first partition, which holds the rows, and the one on its way out.
  auto state = covering_state(old);
  CHECK_FALSE(state.due_valid);
  CHECK_FALSE(state.leases_valid);
  CHECK(state.due_attached == partitions_at_22 - 2);
  CHECK(state.leases_attached == partitions_at_22 - 2);
  // A partition made by the janitor's function between the steps gets its indexes under
  // the function's names, and one attached by hand (the day after) gets them from ATTACH.
  const std::int64_t made =
      old.scalar("SELECT {schema}.outbox_create_partitions('{schema}.outbox_events'::regclass, 9)");
  CHECK(made >= 1);
  const std::string newest_end =
      "(SELECT ends_at FROM {schema}.outbox_partitions('{schema}.outbox_events'::regclass) ORDER BY ends_at DESC "
      "LIMIT 1)";
  old.execute(
      "CREATE TABLE {schema}.outbox_events_manual (LIKE {schema}.outbox_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS)");
  old.execute(
      "DO $$ BEGIN EXECUTE format('ALTER TABLE {schema}.outbox_events ATTACH PARTITION "
      "{schema}.outbox_events_manual FOR VALUES FROM (%L) TO (%L)', {schema}.outbox_event_id_floor(" +
      newest_end + "), {schema}.outbox_event_id_floor(" + newest_end + " + interval '1 day')); END $$");
  // An earlier 0024 run that failed half-way left an INVALID index under the name of the
  // first partition's due index: the runner drops it and builds the right one.
  CHECK_THROWS_AS(old.execute("CREATE UNIQUE INDEX CONCURRENTLY outbox_events_due_covering_legacy ON "
                              "{schema}.outbox_events_legacy (topic)"),
                  pqxx::unique_violation);

  std::vector<MigrationStep> steps;
  const auto report =
      migrate(old.url, {.schema = old.schema, .target_version = 25, .before_step = [&](const MigrationStep& step) {
                          steps.push_back(step);
                        }});
  CHECK(report.applied == std::vector<int>{24, 25});
  REQUIRE(steps.size() == 2);
  CHECK_FALSE(steps[0].transactional);
  CHECK(steps[1].transactional);

  const std::int64_t partitions_now =
      old.scalar("SELECT count(*) FROM pg_inherits WHERE inhparent = '{schema}.outbox_events'::regclass");
  CHECK(partitions_now == partitions_at_22 + made + 1);
  state = covering_state(old);
  CHECK(state.due_valid);
  CHECK(state.leases_valid);
  CHECK(state.due_attached == partitions_now - 1);
  CHECK(state.leases_attached == partitions_now - 1);
  // The partition on its way out was passed over: it has neither index.
  CHECK(old.scalar("SELECT count(*) FROM pg_inherits i JOIN pg_index x ON x.indrelid = i.inhrelid JOIN pg_class c ON "
                   "c.oid = x.indexrelid WHERE i.inhdetachpending AND i.inhparent = "
                   "'{schema}.outbox_events'::regclass AND c.relname LIKE '%covering%'") == 0);
  // The first partition's indexes are the covering definitions, valid, the leftover gone.
  CHECK(old.scalar("SELECT count(*) FROM " + index_definitions_of(old.schema) +
                   " WHERE indexname = 'outbox_events_due_covering_legacy' AND indexdef NOT LIKE '%UNIQUE%' AND "
                   "indexdef LIKE '%(available_at, id) INCLUDE (status, created_at) WHERE%'") == 1);
  CHECK(old.scalar("SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON "
                   "n.oid = c.relnamespace WHERE n.nspname = '" +
                   old.schema + "' AND NOT i.indisvalid") == 0);
  // The old indexes are gone from the parent and from every partition.
  CHECK(old.scalar("SELECT count(*) FROM " + index_definitions_of(old.schema) +
                   " WHERE indexdef LIKE '%(available_at, id) WHERE%' OR indexdef LIKE '%(lease_expires_at) WHERE%'") ==
        0);
  // The janitor's function names a new day's indexes after it, attached at once.
  CHECK(old.scalar("SELECT {schema}.outbox_create_partitions('{schema}.outbox_events'::regclass, 12)") >= 1);
  CHECK(old.scalar("SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = "
                   "'{schema}.outbox_events_due_covering_all'::regclass AND c.relname = 'outbox_events_due_covering' "
                   "|| (SELECT substr(partition_name, 14) FROM {schema}.outbox_partitions('{schema}.outbox_events') "
                   "WHERE partition_name LIKE 'outbox_events_p%' ORDER BY ends_at DESC LIMIT 1)") == 1);
  // Nothing was lost or changed on the way.
  CHECK(old.scalar("SELECT count(*) FROM {schema}.outbox_events") == 3000);
  CHECK(old.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING'") == 1000);
}
