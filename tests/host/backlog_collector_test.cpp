// The backlog collector: its figures against rows put into known states, its lifecycle,
// its configuration checks, and its plans on 1,000,000 receipts.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <sstream>

#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/metrics.hpp"
#include "boxcar/core/tx.hpp"
#include "exposition.hpp"
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

  CHECK(e.value("boxcar_outbox_events", {{"status", "PENDING"}}) == 1);
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

TEST_CASE("a consumer whose backlog drains drops to zero instead of keeping its last value") {
  BacklogSetup s;
  Inbox inbox(s.pool, {.schema = s.db.schema(), .consumers = {kOrders, "legacy.v1"}, .notify = false});
  inbox.accept(message("legacy.v1", "l-1"));
  inbox.accept(message("legacy.v1", "l-2"));
  s.set("l-2", "status = 'DEAD', dead_reason = 'UNSUPPORTED_EVENT'");
  // Only orders is declared: legacy.v1 is an orphan, reported because it has rows.
  BacklogCollector collector(s.pool, s.metrics, {.schema = s.db.schema(), .declared_consumers = {kOrders}});
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
  BacklogCollector good(s.pool, s.metrics, {.schema = s.db.schema(), .declared_consumers = {kOrders}});
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
  // 200,000 events, 1 in 100 not published yet.
  db.query(R"SQL(
    INSERT INTO {schema}.outbox_events
      (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, payload,
       status, claim_token, lease_expires_at, dead_reason, published_at)
    SELECT md5('e' || i)::uuid, 'thing.emitted', 1, 'things', 't1', 'tenant', 't1', '{}', s.status,
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

  const std::map<std::string, std::string> expected_index = {
      {"inbox_claimable", "inbox_receipts_claimable"}, {"inbox_processing", "inbox_receipts_leases"},
      {"inbox_dead", "inbox_receipts_dead"},           {"outbox_due", "outbox_events_due"},
      {"outbox_publishing", "outbox_events_leases"},   {"outbox_dead", "outbox_events_dead"}};
  const auto queries = BacklogCollector::queries(db.schema());
  REQUIRE(queries.size() == 8);
  for (const auto& query : queries) {
    std::string sql = query.sql;
    if (const auto parameter = sql.find("$1"); parameter != std::string::npos)
      sql.replace(parameter, 2, "'" + db.schema() + "'");
    std::string plan;
    for (const auto& row : db.query("EXPLAIN " + sql)) plan += std::string(row[0].c_str()) + "\n";
    INFO(query.name << " plan:\n" << plan);
    CHECK_THAT(plan, !Contains("Seq Scan on inbox_receipts"));
    CHECK_THAT(plan, !Contains("Seq Scan on outbox_events"));
    if (expected_index.contains(query.name)) CHECK_THAT(plan, Contains(expected_index.at(query.name)));
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
  CHECK(series == (1 + 20 + 1) * 4);  // declared, 20 orphans by name, the rest summed; 4 statuses each
  CHECK(pending == 51);               // nothing lost in the sum
  CHECK(s.inbox(kOrders, "PENDING") == 1);
  CHECK(s.inbox("(undeclared)", "PENDING") == 30);

  // A second collection keeps the same series.
  collector.collect_once();
  CHECK(s.inbox("(undeclared)", "PENDING") == 30);
}
