// The backlog collector: its figures against rows put into known states, its lifecycle,
// its configuration checks, and its plans on 1,000,000 receipts.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/metrics.hpp"
#include "boxcar/core/tx.hpp"
#include "exposition.hpp"
#include "notify_flood.hpp"
#include "test_database.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

const std::string kOrders = "orders.v1";
const std::string kAudit = "audit.v1";
const std::string kBilling = "billing.v1";  // declared, never receives anything

struct BacklogSetup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = db.pool(4);
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();

  void set(const std::string& message_id, const std::string& assignments) const {
    db.query("UPDATE {schema}.inbox_receipts SET " + assignments + " WHERE message_id = '" + message_id + "'");
  }
  Exposition scrape() const { return Exposition(metrics->serialize()); }
  std::optional<double> inbox(const std::string& consumer, const std::string& status) const {
    return scrape().value("boxcar_inbox_receipts", {{"consumer", consumer}, {"status", status}});
  }
};

}  // namespace

TEST_CASE("the backlog collector reports every inbox and outbox status, ages and table health") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders, kAudit}, .notify = false});
  for (const auto* id : {"o-1", "o-2", "o-3", "o-4", "o-5", "o-6"}) inbox.accept(message(kOrders, id));
  for (const auto* id : {"a-1", "a-2"}) inbox.accept(message(kAudit, id));
  s.set("o-1", "status = 'DEAD', dead_reason = 'HANDLER_PERMANENT'");
  s.set("o-2", "status = 'RETRYABLE', available_at = now() - interval '120 seconds'");
  s.set("o-3",
        "status = 'PROCESSING', claim_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute'");
  // Scheduled in the future: PENDING, but not due, so it must not make the age negative.
  s.set("o-4", "available_at = now() + interval '1 hour'");
  s.set("o-5", "status = 'COMPLETED', completed_at = now()");
  s.set("o-6", "status = 'RETRYABLE', available_at = now() + interval '10 minutes'");
  // Discarded by an operator: settled, not counted as DEAD.
  s.set("a-2", "status = 'DEAD', dead_reason = 'HANDLER_PERMANENT', discarded_at = now(), discarded_by = 'ops'");

  OutboxEmitter outbox(s.pool, {.schema = s.db.schema(), .notify = false});
  {
    Tx tx = s.pool->begin();
    for (int i = 0; i < 6; ++i)
      outbox.emit(
          tx,
          OutboxMessage{.event_type = "thing.emitted", .schema_version = 1, .topic = "things", .payload = {{"n", i}}},
          {.scope = Scope::tenant("t1")});
    tx.commit();
  }
  const auto ids = s.db.query("SELECT id FROM {schema}.outbox_events ORDER BY id");
  REQUIRE(ids.size() == 6);
  const auto outbox_set = [&](int index, const std::string& assignments) {
    s.db.query("UPDATE {schema}.outbox_events SET " + assignments + " WHERE id = " + ids[index][0].c_str());
  };
  outbox_set(1, "status = 'RETRYABLE', available_at = now() + interval '1 minute'");
  outbox_set(2,
             "status = 'PUBLISHING', claim_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute', "
             "created_at = now() - interval '300 seconds'");
  outbox_set(3, "status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED'");
  // Published long ago: finished, so it must not count as the oldest unpublished event.
  outbox_set(4, "status = 'PUBLISHED', published_at = now(), created_at = now() - interval '1 hour'");
  outbox_set(5, "status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', discarded_at = now()");
  // Three events of an explicit key: the first is its head (PENDING), two wait behind it.
  {
    Tx tx = s.pool->begin();
    for (int i = 0; i < 3; ++i)
      outbox.emit(
          tx,
          OutboxMessage{.event_type = "thing.emitted", .schema_version = 1, .topic = "things", .payload = {{"n", i}}},
          {.scope = Scope::tenant("t2"), .key = "order-2"});
    tx.commit();
  }

  BacklogCollector collector(s.pool, s.metrics,
                             {.schema = s.db.schema(), .declared_consumers = {kOrders, kAudit, kBilling}});
  collector.collect_once();
  const auto e = s.scrape();

  CHECK(s.inbox(kOrders, "PENDING") == 1);     // o-4 (due or not, it is PENDING)
  CHECK(s.inbox(kOrders, "RETRYABLE") == 2);   // o-2, o-6
  CHECK(s.inbox(kOrders, "PROCESSING") == 1);  // o-3
  CHECK(s.inbox(kOrders, "DEAD") == 1);        // o-1
  const auto orders_age = e.value("boxcar_inbox_oldest_due_age_seconds", {{"consumer", kOrders}});
  REQUIRE(orders_age);
  CHECK(*orders_age >= 119);
  CHECK(*orders_age < 180);

  CHECK(s.inbox(kAudit, "PENDING") == 1);
  CHECK(s.inbox(kAudit, "DEAD") == 0);
  CHECK(s.inbox(kAudit, "RETRYABLE") == 0);
  CHECK(s.inbox(kAudit, "PROCESSING") == 0);
  const auto audit_age = e.value("boxcar_inbox_oldest_due_age_seconds", {{"consumer", kAudit}});
  REQUIRE(audit_age);
  CHECK(*audit_age >= 0);
  CHECK(*audit_age < 60);

  // The declared consumer without rows is visible with zeros.
  for (const auto* status : {"PENDING", "RETRYABLE", "PROCESSING", "DEAD"}) CHECK(s.inbox(kBilling, status) == 0);
  CHECK(e.value("boxcar_inbox_oldest_due_age_seconds", {{"consumer", kBilling}}) == 0);
  // COMPLETED is never counted.
  CHECK_FALSE(s.inbox(kOrders, "COMPLETED"));

  CHECK(e.value("boxcar_outbox_events", {{"status", "PENDING"}}) == 2);
  CHECK(e.value("boxcar_outbox_events", {{"status", "WAITING"}}) == 2);
  CHECK(e.value("boxcar_outbox_events", {{"status", "RETRYABLE"}}) == 1);
  CHECK(e.value("boxcar_outbox_events", {{"status", "PUBLISHING"}}) == 1);
  CHECK(e.value("boxcar_outbox_events", {{"status", "DEAD"}}) == 1);
  CHECK_FALSE(e.value("boxcar_outbox_events", {{"status", "PUBLISHED"}}));
  const auto unpublished_age = e.value("boxcar_outbox_oldest_unpublished_age_seconds");
  REQUIRE(unpublished_age);
  CHECK(*unpublished_age >= 299);
  CHECK(*unpublished_age < 360);

  CHECK(e.value("boxcar_table_size_bytes", {{"table", "inbox_receipts"}}) > 8192);
  CHECK(e.value("boxcar_table_size_bytes", {{"table", "outbox_events"}}) > 8192);
  CHECK(e.value("boxcar_table_dead_tuples", {{"table", "inbox_receipts"}}) >= 0);
  CHECK(e.value("boxcar_table_dead_tuples", {{"table", "outbox_events"}}) >= 0);

  CHECK(e.value("boxcar_backlog_collection_seconds") > 0);
  CHECK(e.value("boxcar_backlog_collection_errors_total") == 0);
  CHECK(e.value("boxcar_backlog_last_success_timestamp_seconds") > 1.7e9);
}

TEST_CASE("the backlog collector exports the cluster's notification queue usage, which a stalled listener holds up") {
  BacklogSetup s;
  const std::string channel = "boxcar_queue_" + s.db.schema();
  // A listener inside an open transaction reads nothing until the transaction ends: its
  // queue position holds the cluster's queue tail (as one that stopped reading would).
  pqxx::connection stalled = s.db.connect();
  pqxx::nontransaction(stalled).exec("LISTEN " + stalled.quote_name(channel));
  pqxx::work open(stalled);
  open.exec("SELECT 1");
  NotifyFlood flood(s.db, channel);
  REQUIRE(flood.block_size() == 8192);  // one notification per page (notify_flood.hpp)
  flood.send(64);

  BacklogCollector collector(s.pool, s.metrics, {.schema = s.db.schema(), .interval = 1ms});
  collector.collect_once();
  const auto usage = s.scrape().value("boxcar_database_notify_queue_usage_ratio");
  REQUIRE(usage);
  const double pages = *usage * NotifyFlood::kQueueCapacityPages;
  // At least the 64 pages sent since the stalled listener's LISTEN (less one page at each
  // end), and no more than the queue holds after the collection.
  CHECK(pages >= 62);
  CHECK(pages <= static_cast<double>(flood.queue_pages()) + 0.5);
  open.abort();
}

TEST_CASE("a consumer whose backlog drains drops to zero instead of keeping its last value") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders, "legacy.v1"}, .notify = false});
  inbox.accept(message("legacy.v1", "l-1"));
  inbox.accept(message("legacy.v1", "l-2"));
  s.set("l-2", "status = 'DEAD', dead_reason = 'UNSUPPORTED_EVENT'");
  // Only orders is declared: legacy.v1 is an orphan, reported because it has rows. An
  // interval of 1 ms: the fleet's figures are always old enough to be recomputed.
  BacklogCollector collector(s.pool, s.metrics,
                             {.schema = s.db.schema(), .declared_consumers = {kOrders}, .interval = 1ms});
  collector.collect_once();
  CHECK(s.inbox("legacy.v1", "PENDING") == 1);
  CHECK(s.inbox("legacy.v1", "DEAD") == 1);
  CHECK(s.inbox(kOrders, "PENDING") == 0);

  s.db.query("UPDATE {schema}.inbox_receipts SET status = 'COMPLETED', completed_at = now(), dead_reason = NULL");
  collector.collect_once();
  CHECK(s.inbox("legacy.v1", "PENDING") == 0);
  CHECK(s.inbox("legacy.v1", "DEAD") == 0);
  CHECK(s.scrape().value("boxcar_inbox_oldest_due_age_seconds", {{"consumer", "legacy.v1"}}) == 0);
}

TEST_CASE("a failed backlog collection throws, is counted and leaves the gauges untouched") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders}, .notify = false});
  inbox.accept(message(kOrders, "o-1"));
  BacklogCollector good(s.pool, s.metrics, {.schema = s.db.schema(), .declared_consumers = {kOrders}, .interval = 1ms});
  good.collect_once();
  REQUIRE(s.inbox(kOrders, "PENDING") == 1);

  // Same metrics, a schema without Boxcar's tables: every query fails.
  BacklogCollector broken(s.pool, s.metrics, {.schema = "no_such_schema", .declared_consumers = {kOrders}});
  CHECK_THROWS_AS(broken.collect_once(), DatabaseError);
  const auto e = s.scrape();
  CHECK(e.value("boxcar_backlog_collection_errors_total") == 1);
  CHECK(s.inbox(kOrders, "PENDING") == 1);
  // The pool is still usable afterwards (the failed transaction was rolled back).
  inbox.accept(message(kOrders, "o-2"));
  good.collect_once();
  CHECK(s.inbox(kOrders, "PENDING") == 2);
}

TEST_CASE("the background collector collects at start and stops promptly in the middle of an interval") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders}, .notify = false});
  inbox.accept(message(kOrders, "o-1"));
  BacklogCollector collector(s.pool, s.metrics,
                             {.schema = s.db.schema(), .declared_consumers = {kOrders}, .interval = 1h});
  collector.start();
  collector.start();  // idempotent
  CHECK(eventually([&] { return s.inbox(kOrders, "PENDING") == 1; }));
  const auto before = std::chrono::steady_clock::now();
  collector.stop();
  CHECK(std::chrono::steady_clock::now() - before < 2s);
  collector.stop();  // idempotent

  // A short interval picks up new rows without being asked.
  BacklogCollector fast(s.pool, s.metrics,
                        {.schema = s.db.schema(), .declared_consumers = {kOrders}, .interval = 50ms});
  fast.start();
  inbox.accept(message(kOrders, "o-2"));
  CHECK(eventually([&] { return s.inbox(kOrders, "PENDING") == 2; }));
}

TEST_CASE("the backlog collector rejects an invalid configuration before touching the database") {
  BacklogSetup s;
  CHECK_THROWS_AS(BacklogCollector(nullptr, s.metrics, {}), ConfigError);
  CHECK_THROWS_AS(BacklogCollector(s.pool, nullptr, {}), ConfigError);
  CHECK_THROWS_AS(BacklogCollector(s.pool, s.metrics, {.schema = "Bad-Name"}), ConfigError);
  CHECK_THROWS_AS(BacklogCollector(s.pool, s.metrics, {.interval = 0ms}), ConfigError);
}

TEST_CASE("every backlog query reads its partial index, not the table, on 1,000,000 receipts") {
  TestDatabase db;
  // The fingerprint CHECK is a regular expression that costs ~6 s over 1,000,000 rows
  // here; plans do not depend on CHECK constraints of an unpartitioned table, so this
  // throw-away schema goes without it to keep the test fast.
  db.query("ALTER TABLE {schema}.inbox_receipts DROP CONSTRAINT inbox_receipts_fingerprint");
  // 1,000,000 receipts over 20 consumers: every 200th is backlog (1,250 each of
  // PENDING, RETRYABLE, PROCESSING, DEAD), the rest COMPLETED.
  db.query(R"SQL(
    INSERT INTO {schema}.inbox_receipts
      (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload,
       fingerprint, status, available_at, claim_token, lease_expires_at, dead_reason, completed_at)
    SELECT 'tenant', 't' || (i % 97), 'bench', 'consumer-' || ((i / 800) % 20), 'm-' || i, 'thing.happened', 1,
           '{}'::jsonb, repeat('f', 64), s.status,
           now() - make_interval(secs => i % 600),
           CASE WHEN s.status = 'PROCESSING' THEN md5(i::text)::uuid END,
           CASE WHEN s.status = 'PROCESSING' THEN now() + interval '1 minute' END,
           CASE WHEN s.status = 'DEAD' THEN 'HANDLER_PERMANENT' END,
           CASE WHEN s.status = 'COMPLETED' THEN now() END
    FROM generate_series(1, 1000000) AS i
    CROSS JOIN LATERAL (
      SELECT CASE
               WHEN i % 200 <> 0 THEN 'COMPLETED'
               WHEN i % 800 = 0 THEN 'PENDING'
               WHEN i % 800 = 200 THEN 'RETRYABLE'
               WHEN i % 800 = 400 THEN 'PROCESSING'
               ELSE 'DEAD'
             END AS status) AS s
  )SQL");
  // 200,000 events, 1 in 100 not published yet, each of its own key (none WAITING).
  db.query(R"SQL(
    INSERT INTO {schema}.outbox_events
      (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, payload,
       status, claim_token, lease_expires_at, dead_reason, published_at)
    SELECT {schema}.outbox_event_id_floor(now() - interval '1 day' + i * interval '1 ms'), 'thing.emitted', 1,
           'things', 'k' || i, 'tenant', 't1', '{}', s.status,
           CASE WHEN s.status = 'PUBLISHING' THEN md5(i::text)::uuid END,
           CASE WHEN s.status = 'PUBLISHING' THEN now() + interval '1 minute' END,
           CASE WHEN s.status = 'DEAD' THEN 'ATTEMPTS_EXHAUSTED' END,
           CASE WHEN s.status = 'PUBLISHED' THEN now() END
    FROM generate_series(1, 200000) AS i
    CROSS JOIN LATERAL (
      SELECT CASE
               WHEN i % 100 <> 0 THEN 'PUBLISHED'
               WHEN i % 400 = 0 THEN 'PENDING'
               WHEN i % 400 = 100 THEN 'RETRYABLE'
               WHEN i % 400 = 200 THEN 'PUBLISHING'
               ELSE 'DEAD'
             END AS status) AS s
  )SQL");
  db.query("ANALYZE {schema}.inbox_receipts");
  db.query("ANALYZE {schema}.outbox_events");

  const std::map<std::string, std::string> expected_index = {{"inbox_claimable", "inbox_receipts_claimable"},
                                                             {"inbox_processing", "inbox_receipts_leases"},
                                                             {"inbox_dead", "inbox_receipts_dead"},
                                                             {"outbox_due", "outbox_events_due_covering"},
                                                             {"outbox_publishing", "outbox_events_leases_covering"},
                                                             {"outbox_dead", "outbox_events_dead"},
                                                             {"inbox_waiting", "inbox_receipts_waiting"},
                                                             {"outbox_waiting", "outbox_events_waiting"}};
  // The per-consumer capped scans must walk their index in order and stop at the LIMIT:
  // a Sort (after a bitmap or another index's scan) would read every entry of the
  // consumer first.
  const std::set<std::string> capped = {"inbox_claimable", "inbox_processing", "inbox_dead", "inbox_waiting",
                                        "outbox_waiting"};
  const std::set<std::string> covering = {"inbox_claimable", "inbox_dead", "outbox_due", "outbox_publishing"};
  const auto queries = BacklogCollector::queries(db.schema());
  REQUIRE(queries.size() == 17);
  for (const auto& query : queries) {
    if (query.name.rfind("snapshot_", 0) == 0) continue;  // primary-key lookups on a two-row table
    std::string sql = query.sql;
    for (auto parameter = sql.find("$1"); parameter != std::string::npos; parameter = sql.find("$1"))
      sql.replace(parameter, 2, capped.contains(query.name) ? std::string("10001") : "'" + db.schema() + "'");
    std::string plan;
    // As the collector's transaction runs them (SET LOCAL in backlog_collector.cpp).
    for (const auto& row : db.query("SET jit = off; SET enable_bitmapscan = off; EXPLAIN " + sql))
      plan += std::string(row[0].c_str()) + "\n";
    INFO(query.name << " plan:\n" << plan);
    CHECK_THAT(plan, !Contains("Seq Scan on inbox_receipts"));
    // The events are in the outbox's first partition (outbox_events_legacy); the empty
    // partitions ahead may be "scanned" sequentially, which reads nothing.
    CHECK_THAT(plan, !Contains("Seq Scan on outbox_events_legacy"));
    if (capped.contains(query.name)) CHECK_THAT(plan, !Contains("Sort"));
    if (expected_index.contains(query.name)) CHECK_THAT(plan, Contains(expected_index.at(query.name)));
    // Their covering indexes (0023-0025, 0027-0031) hold every column these read: no heap
    // fetch per row once the pages are all-visible, wherever among retained rows the backlog
    // lies. Every scan of the index is index-only: the skip scan, the capped count, the due age.
    if (covering.contains(query.name)) {
      CHECK_THAT(plan, Contains("Index Only Scan using " + expected_index.at(query.name)));
      CHECK_THAT(plan, !Contains("Index Scan using " + expected_index.at(query.name)));
    }
  }

  // And the figures add up at this size.
  auto metrics = std::make_shared<Metrics>();
  BacklogCollector collector(db.pool(2), metrics, {.schema = db.schema()});
  collector.collect_once();
  const Exposition e(metrics->serialize());
  double pending = 0, retryable = 0, processing = 0, dead = 0;
  for (int c = 0; c < 20; ++c) {
    const std::string consumer = "consumer-" + std::to_string(c);
    pending += e.value("boxcar_inbox_receipts", {{"consumer", consumer}, {"status", "PENDING"}}).value_or(-1e9);
    retryable += e.value("boxcar_inbox_receipts", {{"consumer", consumer}, {"status", "RETRYABLE"}}).value_or(-1e9);
    processing += e.value("boxcar_inbox_receipts", {{"consumer", consumer}, {"status", "PROCESSING"}}).value_or(-1e9);
    dead += e.value("boxcar_inbox_receipts", {{"consumer", consumer}, {"status", "DEAD"}}).value_or(-1e9);
  }
  CHECK(pending == 1250);
  CHECK(retryable == 1250);
  CHECK(processing == 1250);
  CHECK(dead == 1250);
  CHECK(e.value("boxcar_outbox_events", {{"status", "PENDING"}}) == 500);
  CHECK(e.value("boxcar_outbox_events", {{"status", "DEAD"}}) == 500);
  CHECK(e.value("boxcar_backlog_collection_seconds") < 2.0);
}

TEST_CASE("undeclared consumers in the table beyond 20 are summed under one label, so rows cannot add series") {
  BacklogSetup s;
  std::vector<std::string> consumers = {kOrders};
  for (int i = 0; i < 50; ++i) consumers.push_back("orphan" + std::to_string(i) + ".v1");
  // An ingress that declared them all (or a role inserting raw rows) wrote one each.
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = consumers, .notify = false});
  for (const auto& consumer : consumers) inbox.accept(message(consumer, "m-1"));
  BacklogCollector collector(s.pool, s.metrics, {.schema = s.db.schema(), .declared_consumers = {kOrders}});
  collector.collect_once();

  const auto e = s.scrape();
  std::size_t series = 0;
  double pending = 0;
  std::istringstream lines(e.text());
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("boxcar_inbox_receipts{", 0) == 0) {
      ++series;
      if (line.find("status=\"PENDING\"") != std::string::npos) pending += std::stod(line.substr(line.rfind(' ')));
    }
  CHECK(series == (1 + 20 + 1) * 5);  // declared, 20 orphans by name, the rest summed; 5 statuses each
  CHECK(pending == 51);               // nothing lost in the sum
  CHECK(s.inbox(kOrders, "PENDING") == 1);
  CHECK(s.inbox("(undeclared)", "PENDING") == 30);

  // A second collection keeps the same series.
  collector.collect_once();
  CHECK(s.inbox("(undeclared)", "PENDING") == 30);
}

namespace {

// The backlog gauges of an exposition (the figures, not the per-process collection
// metrics), line by line.
std::vector<std::string> backlog_lines(const Exposition& e) {
  std::vector<std::string> lines;
  std::istringstream text(e.text());
  for (std::string line; std::getline(text, line);)
    for (const char* name : {"boxcar_inbox_receipts", "boxcar_inbox_oldest_due_age_seconds", "boxcar_outbox_events",
                             "boxcar_outbox_oldest_unpublished_age_seconds"})
      if (line.rfind(name, 0) == 0) lines.push_back(line);
  return lines;
}

double computed(const Metrics& metrics, const std::string& section) {
  return Exposition(metrics.serialize())
      .value("boxcar_backlog_snapshot_computed_total", {{"section", section}})
      .value_or(-1);
}

}  // namespace

TEST_CASE("inbox counts are exact up to the cap and a labelled estimate above it, the oldest due age always exact") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders, kAudit, kBilling}, .notify = false});
  // orders: 5 PENDING (above a cap of 3), the oldest due for 600 s. audit: exactly 3
  // PENDING (at the cap: exact) and 4 DEAD (above). billing: 1 PROCESSING.
  for (int i = 0; i < 5; ++i) inbox.accept(message(kOrders, "o-" + std::to_string(i)));
  s.set("o-0", "available_at = now() - interval '600 seconds'");
  for (int i = 0; i < 7; ++i) inbox.accept(message(kAudit, "a-" + std::to_string(i)));
  for (int i = 3; i < 7; ++i) s.set("a-" + std::to_string(i), "status = 'DEAD', dead_reason = 'HANDLER_PERMANENT'");
  inbox.accept(message(kBilling, "b-0"));
  s.set("b-0",
        "status = 'PROCESSING', claim_token = gen_random_uuid(), lease_expires_at = now() + interval '1 minute'");
  const auto estimated = [&](const std::string& consumer, const std::string& status) {
    return s.scrape().value("boxcar_inbox_receipts_estimated", {{"consumer", consumer}, {"status", status}});
  };

  // Before any ANALYZE there is no statistic: above the cap the count is what the capped
  // scan saw (cap + 1), a lower bound, and it says it is an estimate.
  BacklogCollector early(s.pool, s.metrics, {.schema = s.db.schema(), .exact_cap = 3});
  early.collect_once();
  CHECK(s.inbox(kOrders, "PENDING") >= 4);
  CHECK(estimated(kOrders, "PENDING") == 1);

  // With statistics (ANALYZE samples the whole of this small table, so its frequencies
  // are exact): the estimate is the count.
  s.db.query("ANALYZE {schema}.inbox_receipts");
  s.db.query("UPDATE {schema}.backlog_snapshot SET collected_at = '-infinity'");
  BacklogCollector collector(s.pool, s.metrics, {.schema = s.db.schema(), .exact_cap = 3});
  collector.collect_once();
  CHECK(s.inbox(kOrders, "PENDING") == 5);
  CHECK(estimated(kOrders, "PENDING") == 1);
  // One capped scan reads PENDING and RETRYABLE together: both are estimates.
  CHECK(s.inbox(kOrders, "RETRYABLE") == 0);
  CHECK(estimated(kOrders, "RETRYABLE") == 1);
  const auto orders_age = s.scrape().value("boxcar_inbox_oldest_due_age_seconds", {{"consumer", kOrders}});
  REQUIRE(orders_age);
  CHECK(*orders_age >= 599);
  CHECK(*orders_age < 660);

  CHECK(s.inbox(kAudit, "PENDING") == 3);
  CHECK(estimated(kAudit, "PENDING") == 0);
  CHECK(s.inbox(kAudit, "DEAD") == 4);
  CHECK(estimated(kAudit, "DEAD") == 1);
  CHECK(s.inbox(kBilling, "PROCESSING") == 1);
  CHECK(estimated(kBilling, "PROCESSING") == 0);
  CHECK(estimated(kBilling, "PENDING") == 0);

  // The default cap counts all of these exactly.
  s.db.query("UPDATE {schema}.backlog_snapshot SET collected_at = '-infinity'");
  BacklogCollector exact(s.pool, s.metrics, {.schema = s.db.schema()});
  exact.collect_once();
  CHECK(s.inbox(kOrders, "PENDING") == 5);
  CHECK(estimated(kOrders, "PENDING") == 0);
  CHECK(estimated(kAudit, "DEAD") == 0);
  CHECK_THROWS_AS(BacklogCollector(s.pool, s.metrics, {.schema = s.db.schema(), .exact_cap = 0}), ConfigError);
}

TEST_CASE("above the exact cap the WAITING events are still counted exactly, from the key rows") {
  BacklogSetup s;
  OutboxEmitter outbox(s.pool, {.schema = s.db.schema(), .notify = false});
  for (const auto* tenant : {"t1", "t2"}) {
    Tx tx = s.pool->begin();
    for (int i = 0; i < 3; ++i)
      outbox.emit(
          tx,
          OutboxMessage{.event_type = "thing.emitted", .schema_version = 1, .topic = "things", .payload = {{"n", i}}},
          {.scope = Scope::tenant(tenant), .key = tenant});
    tx.commit();
  }
  const auto waiting = [&](std::int64_t cap) {
    s.db.query("UPDATE {schema}.backlog_snapshot SET collected_at = '-infinity'");
    BacklogCollector collector(s.pool, s.metrics, {.schema = s.db.schema(), .exact_cap = cap});
    collector.collect_once();
    return s.scrape().value("boxcar_outbox_events", {{"status", "WAITING"}}).value_or(-1);
  };
  // Below the cap, from outbox_events_waiting; at 1, one key row per key, the sum of
  // (unfinished - 1): each key's head is the one unfinished event that is not WAITING.
  CHECK(waiting(1000) == 4);
  CHECK(waiting(1) == 4);
  CHECK(s.scrape().value("boxcar_outbox_events", {{"status", "PENDING"}}).value_or(-1) == 2);
}

TEST_CASE("two collectors in one schema: one computes per interval, and both export the same gauges") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders, kAudit}, .notify = false});
  for (const auto* id : {"o-1", "o-2", "o-3"}) inbox.accept(message(kOrders, id));
  inbox.accept(message(kAudit, "a-1"));
  s.set("o-1", "status = 'DEAD', dead_reason = 'HANDLER_PERMANENT'");
  s.set("o-2", "available_at = now() - interval '90 seconds'");
  OutboxEmitter outbox(s.pool, {.schema = s.db.schema(), .notify = false});
  {
    Tx tx = s.pool->begin();
    outbox.emit(tx, OutboxMessage{.event_type = "thing.emitted", .schema_version = 1, .topic = "things"},
                {.scope = Scope::tenant("t1")});
    tx.commit();
  }

  auto metrics_a = std::make_shared<Metrics>();
  auto metrics_b = std::make_shared<Metrics>();
  const BacklogOptions options{.schema = s.db.schema(), .declared_consumers = {kOrders, kAudit}, .interval = 1h};
  BacklogCollector a(s.db.pool(2), metrics_a, options);
  BacklogCollector b(s.db.pool(2), metrics_b, options);
  REQUIRE(a.identity() != b.identity());

  a.collect_once();
  b.collect_once();
  b.collect_once();
  a.collect_once();
  CHECK(computed(*metrics_a, "inbox") == 1);
  CHECK(computed(*metrics_a, "outbox") == 1);
  CHECK(computed(*metrics_b, "inbox") == 0);
  CHECK(computed(*metrics_b, "outbox") == 0);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.backlog_snapshot WHERE collected_by = '" + a.identity() + "'") == 2);

  const Exposition ea(metrics_a->serialize());
  const Exposition eb(metrics_b->serialize());
  CHECK(ea.value("boxcar_inbox_receipts", {{"consumer", kOrders}, {"status", "PENDING"}}) == 2);
  CHECK(ea.value("boxcar_outbox_events", {{"status", "PENDING"}}) == 1);
  // receipts and their estimated flags, ages, outbox statuses, outbox age
  CHECK(backlog_lines(ea).size() == 2 * 5 * 2 + 2 + 5 + 1);
  CHECK(backlog_lines(ea) == backlog_lines(eb));
  CHECK(eb.value("boxcar_backlog_snapshot_age_seconds", {{"section", "inbox"}}) >= 0);
  CHECK(eb.value("boxcar_backlog_last_success_timestamp_seconds") > 1.7e9);

  // Running side by side in the background, the fleet computes at most once per interval:
  // collections start at least one interval after the stored figures were collected.
  const BacklogOptions fast{.schema = s.db.schema(), .declared_consumers = {kOrders}, .interval = 200ms};
  auto metrics_c = std::make_shared<Metrics>();
  auto metrics_d = std::make_shared<Metrics>();
  s.db.query("UPDATE {schema}.backlog_snapshot SET collected_at = '-infinity'");
  const auto started = std::chrono::steady_clock::now();
  {
    BacklogCollector c(s.db.pool(2), metrics_c, fast);
    BacklogCollector d(s.db.pool(2), metrics_d, fast);
    c.start();
    d.start();
    CHECK(eventually([&] { return computed(*metrics_c, "inbox") + computed(*metrics_d, "inbox") >= 5; }, 20s));
  }
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const double computations = computed(*metrics_c, "inbox") + computed(*metrics_d, "inbox");
  INFO("computations " << computations << " in " << elapsed << " s");
  CHECK(computations <= elapsed / 0.2 + 1);
}

TEST_CASE("when the elected collector dies or stops, another one computes at its next cycle") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders}, .notify = false});
  inbox.accept(message(kOrders, "o-1"));
  auto metrics_a = std::make_shared<Metrics>();
  auto metrics_b = std::make_shared<Metrics>();
  const BacklogOptions options{.schema = s.db.schema(), .declared_consumers = {kOrders}, .interval = 1h};
  auto a = std::make_unique<BacklogCollector>(s.db.pool(2), metrics_a, options);
  BacklogCollector b(s.db.pool(2), metrics_b, options);
  a->collect_once();
  REQUIRE(computed(*metrics_a, "inbox") == 1);

  // a stops; its figures grow old (as after an hour without it); b's next cycle computes.
  a.reset();
  inbox.accept(message(kOrders, "o-2"));
  s.db.query("UPDATE {schema}.backlog_snapshot SET collected_at = now() - interval '2 hours'");
  b.collect_once();
  CHECK(computed(*metrics_b, "inbox") == 1);
  CHECK(Exposition(metrics_b->serialize())
            .value("boxcar_inbox_receipts", {{"consumer", kOrders}, {"status", "PENDING"}}) == 2);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.backlog_snapshot WHERE section = 'inbox' AND collected_by = '" +
                    b.identity() + "'") == 1);

  // A process elected and still computing holds the section's row: the others export the
  // last figures without waiting and without computing them a second time.
  s.db.query("UPDATE {schema}.backlog_snapshot SET collected_at = now() - interval '2 hours'");
  auto elected = s.db.connect();
  pqxx::work holding(elected);
  const int elected_pid = holding.exec1("SELECT pg_backend_pid()")[0].as<int>();
  holding.exec("SELECT 1 FROM \"" + s.db.schema() + "\".backlog_snapshot WHERE section = 'inbox' FOR NO KEY UPDATE");
  auto metrics_c = std::make_shared<Metrics>();
  BacklogCollector c(s.db.pool(2), metrics_c, options);
  const auto before = std::chrono::steady_clock::now();
  c.collect_once();
  CHECK(std::chrono::steady_clock::now() - before < 5s);
  CHECK(computed(*metrics_c, "inbox") == 0);
  CHECK(Exposition(metrics_c->serialize())
            .value("boxcar_inbox_receipts", {{"consumer", kOrders}, {"status", "PENDING"}}) == 2);
  CHECK(Exposition(metrics_c->serialize()).value("boxcar_backlog_snapshot_age_seconds", {{"section", "inbox"}}) >=
        7000);

  // The elected process dies mid-computation: its transaction ends, the row is free, and
  // the next cycle of another process computes.
  {
    auto admin = s.db.connect();
    pqxx::nontransaction(admin).exec_params("SELECT pg_terminate_backend($1)", elected_pid);
  }
  CHECK(eventually([&] {
    c.collect_once();
    return computed(*metrics_c, "inbox") == 1;
  }));
  CHECK(Exposition(metrics_c->serialize()).value("boxcar_backlog_snapshot_age_seconds", {{"section", "inbox"}}) == 0);
}

TEST_CASE("the backlog collector exports the age of the xmin horizon, which a held snapshot pins") {
  BacklogSetup s;
  // The bench's holder (docs/design/held-snapshot.md): a REPEATABLE READ transaction that
  // has read once keeps its snapshot's xmin while 200 other transactions take an id.
  pqxx::connection holder = s.db.connect();
  pqxx::nontransaction hold(holder);
  hold.exec("BEGIN ISOLATION LEVEL REPEATABLE READ");
  hold.exec("SELECT 1");
  const int holder_pid = holder.backendpid();
  pqxx::connection writer = s.db.connect();
  pqxx::nontransaction(writer).exec(
      "DO $$ BEGIN FOR i IN 1..200 LOOP PERFORM pg_catalog.pg_current_xact_id(); COMMIT; END LOOP; END $$");
  const auto held_age = s.db.scalar(
      "SELECT pg_catalog.age(backend_xmin) FROM pg_catalog.pg_stat_activity WHERE pid = " + std::to_string(holder_pid));
  REQUIRE(held_age >= 200);

  BacklogCollector collector(s.pool, s.metrics, {.schema = s.db.schema(), .interval = 1ms});
  collector.collect_once();
  const auto age = s.scrape().value("boxcar_database_xmin_horizon_age_transactions");
  REQUIRE(age);
  // The oldest holder of the database: this one, or an older one of a test beside it.
  CHECK(*age >= static_cast<double>(held_age));
  hold.exec("ROLLBACK");
}
