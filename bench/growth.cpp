// bench_growth: does the hot path stay flat as the tables grow with retained rows?
// Two schemas in the same cluster: one whose tables hold only what each measurement
// needs ("empty"), one that also holds N retained COMPLETED inbox receipts and N
// PUBLISHED outbox events ("loaded"). Every case measures both, interleaved round by
// round, so the ratio loaded/empty is a same-run figure.
//
//   scripts/bench growth [--rows N | --rows A,B,...] [--messages M] [--events E] [--rounds R (at most 3 used)]
//                        [--seconds S]
//
// --rows N (default kDefaultRows) measures at N/10 and at N; --rows A,B,... at each of the
// given cumulative sizes. The loaded schema is filled up to each size in turn
// (INSERT ... SELECT FROM generate_series, then VACUUM ANALYZE as autovacuum would) and
// every case is measured at each size; the slope is read from the stages, the ratio
// lines are those of the largest. Retained rows have realistic shapes: 8 consumers, 3
// sources, ~1,000 tenants, UUIDv7-shaped ids, timestamps spread over 7 days, ~490-byte
// jsonb payloads with metadata (inbox) and ~450-byte payload texts (outbox).
//
// Cases (loaded vs empty):
//   growth_accept        accept() at 16 threads for S seconds, fresh UUIDv7 message ids of a
//                        consumer/source/tenant the retained rows also use;
//   growth_batched_t16   a Worker (batch_size 32, 16 threads) drains M accepted messages,
//                        the handler inserting one row in context.tx (bench/worker.cpp's
//                        batched case);
//   growth_publisher     a Publisher (batch 1000) drains E due events to the librdkafka mock
//                        cluster (bench/publisher.cpp's setup), the events in the first
//                        daily partition, the retained ones in outbox_events_legacy (steady
//                        state: each day's events in a partition of their own);
//   growth_publisher_legacy  the same with the events beside the retained ones in
//                        outbox_events_legacy, as during the two days after an outbox with a
//                        history was partitioned (informational);
//   growth_idle_claim    the worker's claim with nothing due, right after the drains: it reads
//                        the dead claimable entries vacuum has left (informational);
//   growth_collector_*   each query of BacklogCollector::queries(schema), over the same small
//                        backlog in both schemas (1/fastest execution, median of 5 rounds spread over time),
//                        first on a fresh backlog with both schemas' backlog indexes
//                        rebuilt (the empty one's by TRUNCATE; BacklogIndexes), then again
//                        after the churn, the loaded schema's indexes as the cases left them
//                        (after_churn_*, no ratio line). Timed with this thread and every query's backend
//                        on one CPU (PinnedToOneCpu). Before each run, where the claimable
//                        backlog sits (heap and visibility-map pages) is printed;
//   growth_collector_inbox_claimable_accept_order  the claimable count over a backlog whose
//                        due times follow its insertion order (informational; BacklogOrder).
// Between measurements both schemas lose what they do not retain the same way (DELETE,
// VACUUM): everything in the empty one, the open backlog in the loaded one; before each
// collector measurement the empty one's tables are truncated (load_collector_backlog).
// The last lines are `ratio CASE VALUE TARGET`, and `info CASE VALUE` for the informational
// cases (docs/benchmarks.md). With BOXCAR_BENCH_EXPLAIN=SUBSTRING set, each collector case
// whose name contains it first prints both sides' EXPLAIN (ANALYZE, BUFFERS), custom and
// generic plan, and after each round one execution of the plan its runner uses.
#include <sched.h>

#include <cstdlib>
#include <optional>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/core/migrate.hpp"
#include "boxcar/core/uuid.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "harness.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::bench::Admin;
using boxcar::bench::CaseResult;
using boxcar::bench::Measurement;
using boxcar::bench::Step;
using Clock = std::chrono::steady_clock;
using boxcar::bench::fixed;
using boxcar::bench::since;

constexpr const char* kEmpty = "bench_growth_empty";
constexpr const char* kLoaded = "bench_growth_loaded";
// A consumer, source and tenant that the retained rows also use: new identities land in
// the same subrange of the identity index as millions of retained ones.
constexpr const char* kConsumer = "orders.projection.v1";
constexpr const char* kSource = "orders-service";
constexpr const char* kTenant = "tenant-7";
constexpr const char* kTopic = "bench";
constexpr int kAcceptThreads = 16;
constexpr int kDrainThreads = 16;
constexpr std::size_t kClaim = 32;
constexpr std::size_t kPublisherBatch = 1000;
constexpr int kQueryRounds = 5;
constexpr int kQueryRuns = 61;
const std::string kQueryDetail =
    "executions/s, 1/fastest execution, median of " + std::to_string(kQueryRounds) + " rounds";
constexpr double kTarget = 0.90;
// The claimable count over a backlog scattered among retained rows reads each entry's
// visibility-map page in due order; holding 0.90 would take an index in insertion order that
// every accept pays for (docs/benchmarks.md, "Where a backlog lands").
constexpr const char* kClaimableCase = "growth_collector_inbox_claimable";
constexpr double kClaimableTarget = 0.80;
// The largest size whose run fits in 15 minutes on the 2-core machine of docs/benchmarks.md
// (loading dominates: see the load rates there).
constexpr long long kDefaultRows = 2'000'000;

std::string table(const char* schema, const char* name) { return std::string(schema) + "." + name; }

// The cases printed as `info CASE VALUE`, without a target: the idle claim (what vacuum
// has not reached yet), the publisher during the two days after the partitioning
// migration, and the claimable count over a backlog in accept order (BacklogOrder).
constexpr const char* kIdleClaimCase = "growth_idle_claim";
constexpr const char* kPublisherLegacyCase = "growth_publisher_legacy";
constexpr const char* kClaimableAcceptOrderCase = "growth_collector_inbox_claimable_accept_order";
bool informational(const std::string& name) {
  return name == kIdleClaimCase || name == kPublisherLegacyCase || name == kClaimableAcceptOrderCase;
}

// ---- loading retained rows -------------------------------------------------------------

// 1,009 realistic payload/metadata/fingerprint shapes, built once per session: rows pick
// one by id, so generating a row costs string concatenation only.
constexpr const char* kShapes = R"sql(
CREATE TEMP TABLE IF NOT EXISTS growth_shapes AS
SELECT k,
       jsonb_build_object(
         'orderId', 'o-' || k, 'customerId', 'c-' || (k * 7919 % 100003), 'currency', 'EUR',
         'total', ((k * 7919 % 50000) / 100.0),
         'items', jsonb_build_array(
            jsonb_build_object('sku', 'sku-' || (k % 1009), 'qty', 1 + k % 3, 'price', 19.99),
            jsonb_build_object('sku', 'sku-' || (k % 1013), 'qty', 2, 'price', 5.5),
            jsonb_build_object('sku', 'sku-' || (k % 1019), 'qty', 1, 'price', 120)),
         'shipping', jsonb_build_object('street', (k % 400) || ' Long Street', 'city', 'Berlin',
                                        'zip', lpad((k % 99999)::text, 5, '0'), 'country', 'DE'),
         'note', 'gift wrap, leave at the door, call before delivery') AS payload,
       jsonb_build_object('traceparent', '00-' || md5(k::text) || '-' || substr(md5(k::text), 1, 16) || '-01',
                          'correlationId', 'corr-' || k) AS metadata,
       md5(k::text) || md5((k + 1)::text) AS fingerprint
FROM generate_series(0, 1008) AS k
)sql";

// Row g of `total` (g in first..last): created at a time spread evenly over the last 7
// days in id order; its id is UUIDv7-shaped from that time (so ids sort by time, as the
// UUIDv7 event ids Boxcar publishers emit do) and unique by g. In the partitioned outbox
// (migration 0019) these past ids all land in outbox_events_legacy, the partition FROM
// MINVALUE up to the first daily one: the shape of an installation that retained its
// events in the outbox before it was partitioned.
std::string row_time_and_id(long long total) {
  const std::string n = std::to_string(total);
  return "CROSS JOIN LATERAL (SELECT now() - interval '7 days' + g * (interval '7 days' / " + n +
         ") AS t) AS ts "
         "CROSS JOIN LATERAL (SELECT lpad(to_hex((extract(epoch FROM ts.t) * 1000)::bigint), 12, '0') AS h, "
         "lpad(to_hex(g), 18, '0') AS x) AS hx "
         "CROSS JOIN LATERAL (SELECT substr(h, 1, 8) || '-' || substr(h, 9, 4) || '-7' || substr(x, 1, 3) || '-8' || "
         "substr(x, 4, 3) || '-' || substr(x, 7, 12) AS uuid7) AS u ";
}

std::string load_inbox_sql(const char* schema, long long first, long long last, long long total) {
  return "INSERT INTO " + table(schema, "inbox_receipts") +
         " (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, metadata, "
         "fingerprint, status, attempts, finished_attempts, available_at, created_at, updated_at, completed_at) "
         "SELECT 'tenant', 'tenant-' || (g % 997), "
         "(ARRAY['orders-service', 'checkout-service', 'payments-service'])[1 + g % 3], "
         "(ARRAY['orders.projection.v1', 'billing.invoice.v1', 'shipping.label.v1', 'search.index.v1', "
         "'loyalty.points.v1', 'fraud.score.v1', 'email.receipt.v1', 'analytics.v1'])[1 + g % 8], "
         "u.uuid7, 'order.created', 1, s.payload, s.metadata, s.fingerprint, 'COMPLETED', 1, 1, ts.t, ts.t, "
         "ts.t + interval '150 milliseconds', ts.t + interval '150 milliseconds' "
         "FROM generate_series(" +
         std::to_string(first) + ", " + std::to_string(last) + ") AS g JOIN growth_shapes AS s ON s.k = g % 1009 " +
         row_time_and_id(total);
}

std::string load_outbox_sql(const char* schema, long long first, long long last, long long total) {
  return "INSERT INTO " + table(schema, "outbox_events") +
         " (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, causation_id, "
         "correlation_id, traceparent, payload, status, attempts, available_at, created_at, updated_at, "
         "published_at) "
         "SELECT u.uuid7::uuid, 'order.projected', 1, "
         "(ARRAY['orders.projected', 'invoices.issued', 'labels.printed', 'points.awarded'])[1 + g % 4], "
         "'tenant-' || (g % 997), 'tenant', 'tenant-' || (g % 997), 'm-' || g, s.metadata ->> 'correlationId', "
         "s.metadata ->> 'traceparent', s.payload::text, 'PUBLISHED', 1, ts.t, ts.t, "
         "ts.t + interval '40 milliseconds', ts.t + interval '40 milliseconds' "
         "FROM generate_series(" +
         std::to_string(first) + ", " + std::to_string(last) + ") AS g JOIN growth_shapes AS s ON s.k = g % 1009 " +
         row_time_and_id(total);
}

// Grows the loaded schema's two tables from `from` to `to` retained rows each: inbox and
// outbox on two connections in parallel, then VACUUM ANALYZE each (as autovacuum would:
// the visibility map set, statistics current). Returns a line describing the timings.
std::string grow(const std::string& url, long long from, long long to, long long total) {
  Admin admin(url);
  // Fewer checkpoints while loading (each one makes the next write of every page log a
  // full-page image); reset before anything is measured. Needs superuser: optional.
  bool raised = false;
  try {
    admin.exec("ALTER SYSTEM SET max_wal_size = '32GB'");
    admin.exec("SELECT pg_reload_conf()");
    raised = true;
  } catch (const std::exception&) {
  }
  double inbox_s = 0, outbox_s = 0, inbox_vacuum_s = 0, outbox_vacuum_s = 0;
  std::exception_ptr error;
  std::mutex error_mutex;
  const auto run = [&](const std::string& sql, const char* relation, double& load_s, double& vacuum_s) {
    try {
      pqxx::connection c(url);
      pqxx::nontransaction n(c);
      n.exec("SET maintenance_work_mem = '512MB'");
      // A hash join on the analysed shapes keeps generate_series' order: rows go in by id,
      // time and key order, as they would have arrived (a merge join would sort them).
      n.exec("SET work_mem = '64MB'");
      n.exec(kShapes);
      n.exec("ANALYZE growth_shapes");
      auto start = Clock::now();
      n.exec(sql);
      load_s = since(start);
      start = Clock::now();
      n.exec(std::string("VACUUM ANALYZE ") + relation);
      vacuum_s = since(start);
    } catch (...) {
      std::lock_guard lock(error_mutex);
      if (!error) error = std::current_exception();
    }
  };
  const auto start = Clock::now();
  std::thread inbox([&] {
    run(load_inbox_sql(kLoaded, from + 1, to, total), (table(kLoaded, "inbox_receipts")).c_str(), inbox_s,
        inbox_vacuum_s);
  });
  std::thread outbox([&] {
    run(load_outbox_sql(kLoaded, from + 1, to, total), (table(kLoaded, "outbox_events")).c_str(), outbox_s,
        outbox_vacuum_s);
  });
  inbox.join();
  outbox.join();
  const double wall = since(start);
  if (raised) {
    admin.exec("ALTER SYSTEM RESET max_wal_size");
    admin.exec("SELECT pg_reload_conf()");
  }
  const auto checkpoint_start = Clock::now();
  admin.checkpoint();
  const double checkpoint_s = since(checkpoint_start);
  if (error) std::rethrow_exception(error);
  return "loaded " + std::to_string(to - from) + " rows into each table in " + fixed(wall, 1) +
         " s wall (inbox insert " + fixed(inbox_s, 1) + " s + VACUUM ANALYZE " + fixed(inbox_vacuum_s, 1) +
         " s, outbox insert " + fixed(outbox_s, 1) + " s + VACUUM ANALYZE " + fixed(outbox_vacuum_s, 1) +
         " s, in parallel), then CHECKPOINT " + fixed(checkpoint_s, 1) + " s";
}

std::string sizes(const std::string& url) {
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  std::string out;
  for (const char* t : {"inbox_receipts", "outbox_events"}) {
    // Summed over the partitions: a partitioned table (outbox_events) has no storage of its
    // own, and pg_partition_tree lists nothing for a plain one (inbox_receipts).
    const std::string relation = "'" + table(kLoaded, t) + "'::regclass";
    const auto r = n.exec(
        "SELECT pg_size_pretty(sum(pg_relation_size(relid))), "
        "pg_size_pretty(sum(pg_indexes_size(relid))) FROM (SELECT relid FROM pg_partition_tree(" +
        relation + ") WHERE isleaf UNION SELECT " + relation + ") AS parts");
    out += std::string(out.empty() ? "" : ", ") + t + " heap " + r[0][0].c_str() + " + indexes " + r[0][1].c_str();
  }
  return out;
}

// ---- accept ----------------------------------------------------------------------------

boxcar::AcceptRequest accept_request() {
  return {.scope = boxcar::Scope::tenant(kTenant),
          .source = kSource,
          .consumer = kConsumer,
          .message_id = {},
          .event_type = "order.created",
          .schema_version = 1,
          .payload = nlohmann::json::parse(
              R"({"orderId":"o-123","customerId":"c-42","currency":"EUR","total":12.5,)"
              R"("items":[{"sku":"sku-1","qty":1,"price":19.99},{"sku":"sku-2","qty":2,"price":5.5}],)"
              R"("shipping":{"street":"1 Long Street","city":"Berlin","zip":"10115","country":"DE"}})"),
          .metadata = {.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
}

struct AcceptSide {
  std::shared_ptr<boxcar::ConnectionPool> pool;
  std::unique_ptr<boxcar::Inbox> inbox;
};

Measurement accept_for(AcceptSide& side, double seconds) {
  return boxcar::bench::run_timed(kAcceptThreads, seconds, [&](int) -> Step {
    return [&inbox = *side.inbox, request = accept_request()]() mutable -> std::uint64_t {
      request.message_id = boxcar::uuid_v7();
      const boxcar::Receipt receipt = inbox.accept(request);
      if (receipt.kind != boxcar::Receipt::Kind::Accepted) throw std::runtime_error("accept() did not accept");
      return 1;
    };
  });
}

// Before each accept measurement: both schemas lose the last measurements' PENDING
// receipts the same way (DELETE, VACUUM), so both insert into pages vacuum freed and pay
// the same full-page images after the checkpoint (a TRUNCATEd table would get brand-new
// pages, which are logged without them). What differs is only the retained rows.
void reset_accept(Admin& admin) {
  for (const char* schema : {kEmpty, kLoaded}) {
    admin.exec("DELETE FROM " + table(schema, "inbox_receipts") + " WHERE status = 'PENDING'");
    admin.exec("VACUUM " + table(schema, "inbox_receipts"));
  }
  admin.checkpoint();
}

// ---- batched drain ---------------------------------------------------------------------

class InsertRow final : public boxcar::InboxHandler {
 public:
  explicit InsertRow(std::string schema)
      : sql_("INSERT INTO " + schema + ".app_rows (message_id, attempt) VALUES ($1, $2)") {}
  void handle(const nlohmann::json&, boxcar::HandlerContext& context) override {
    context.tx.exec_prepared("bench.app_row", sql_, context.message_id, context.attempt);
  }

 private:
  std::string sql_;
};

// `count` fresh PENDING messages in each schema, accepted with accept_many (untimed).
void load_backlog(const std::string& url, int count) {
  Admin admin(url);
  // The empty schema retains nothing (its last drain's receipts are purged, as a retention
  // of zero would), the loaded one keeps them as more retained rows; both are vacuumed below.
  admin.exec("DELETE FROM " + table(kEmpty, "inbox_receipts"));
  admin.exec("TRUNCATE " + table(kEmpty, "app_rows") + ", " + table(kLoaded, "app_rows"));
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 4});
  for (const char* schema : {kEmpty, kLoaded}) {
    boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {kConsumer}, .notify = false});
    std::vector<boxcar::AcceptRequest> batch;
    for (int i = 0; i < count; ++i) {
      auto request = accept_request();
      request.message_id = boxcar::uuid_v7();
      batch.push_back(std::move(request));
      if (batch.size() == 1000 || i + 1 == count) {
        for (const auto& r : inbox.accept_many(batch)) r.rethrow_if_error();
        batch.clear();
      }
    }
    admin.exec("VACUUM ANALYZE " + table(schema, "inbox_receipts"));
  }
  admin.checkpoint();
}

Measurement drain(const std::string& url, const char* schema, int count) {
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = static_cast<std::size_t>(kDrainThreads) + 2});
  boxcar::Worker worker(
      pool,
      {.schema = schema,
       .consumers = {kConsumer},
       .concurrency = static_cast<std::size_t>(kDrainThreads),
       .batch_size = kClaim,
       .claim_limit = kClaim,
       .lease = 60s,
       .handler_timeout = 30s,
       .poll_interval = 50ms},
      {{.consumer = kConsumer, .supports = {{"order.created", 1}}, .handler = std::make_shared<InsertRow>(schema)}});
  const auto start = Clock::now();
  worker.start();
  boxcar::bench::wait_until([&] { return worker.stats().completed >= static_cast<std::uint64_t>(count); });
  const double elapsed = since(start);
  worker.stop();
  return {.units = static_cast<std::uint64_t>(count), .seconds = elapsed};
}

// ---- publisher -------------------------------------------------------------------------

// Where the drained events' ids put them in the partitioned outbox (migrations 0017-0019).
enum class EventsLand {
  // The first daily partition after outbox_events_legacy: where every installation's events
  // go from the partitioning migration's first daily bound on (two days after it ran), the
  // retained rows staying in older partitions. The steady state.
  daily_partition,
  // outbox_events_legacy, beside the retained rows: an outbox that held a history when it
  // was partitioned, during the two days before the first daily bound.
  legacy_partition,
};

// `count` PENDING events in `schema`, not yet due (bench/publisher.cpp's columns, with the
// retained events' payload sizes), unordered like bench/publisher.cpp's publish cases.
void load_events(const std::string& url, const char* schema, int count, EventsLand land) {
  Admin admin(url);
  admin.exec(kShapes);
  // The empty schema retains nothing: its last run's events go (vacuumed in publish()).
  admin.exec("DELETE FROM " + table(schema, "outbox_events") +
             (std::string(schema) == kEmpty ? std::string() : std::string(" WHERE status <> 'PUBLISHED'")));
  // An hour into the first daily partition: ids from the emitter's clock two days on.
  const std::string emitted_at = land == EventsLand::legacy_partition
                                     ? std::string("pg_catalog.now()")
                                     : "(SELECT ends_at FROM " + table(schema, "outbox_partitions") + "('" +
                                           table(schema, "outbox_events") +
                                           "') WHERE partition_name = 'outbox_events_legacy') + interval '1 hour'";
  admin.exec("INSERT INTO " + table(schema, "outbox_events") +
             " (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, "
             "causation_id, payload, available_at, ordered) SELECT " +
             boxcar::bench::uuid_v7_sql(emitted_at) + ", 'order.projected', 1, '" + kTopic +
             "', 'tenant-' || (g % 50), 'tenant', 'tenant-' || (g % 50), 'm-' || g, s.payload::text, "
             "now() + interval '1 day', false FROM generate_series(1, " +
             std::to_string(count) + ") g JOIN growth_shapes AS s ON s.k = g % 1009");
}

Measurement publish(const std::string& url, const std::string& bootstrap, const char* schema, int count,
                    EventsLand land) {
  load_events(url, schema, count, land);
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 4});
  boxcar::Publisher publisher(pool, {.schema = schema,
                                     .kafka = {{"bootstrap.servers", bootstrap}},
                                     .batch_size = kPublisherBatch,
                                     .delivery_timeout = 30s});
  {
    // Steady state: the producer's start-up is paid before the clock starts.
    boxcar::OutboxEmitter outbox(pool, {.schema = schema, .notify = false});
    boxcar::Tx tx = pool->begin();
    outbox.emit(tx,
                boxcar::OutboxMessage{
                    .event_type = "warm-up", .schema_version = 1, .topic = kTopic, .payload = {{"warm", true}}},
                {.scope = boxcar::Scope::global()});
    tx.commit();
    publisher.drain();
  }
  Admin admin(url);
  admin.exec("UPDATE " + table(schema, "outbox_events") + " SET available_at = now() WHERE status = 'PENDING'");
  admin.exec("VACUUM ANALYZE " + table(schema, "outbox_events"));
  admin.checkpoint();
  const auto start = Clock::now();
  publisher.drain();
  const double seconds = since(start);
  if (publisher.stats().delivered != static_cast<std::uint64_t>(count) + 1)
    throw std::runtime_error("publisher delivered " + std::to_string(publisher.stats().delivered) + " of " +
                             std::to_string(count));
  return {.units = static_cast<std::uint64_t>(count), .seconds = seconds};
}

// ---- backlog collector queries ---------------------------------------------------------

// How the collector backlog's due times relate to the order its rows are inserted in.
// permuted: row g is due (g mod 600) s ago, so a consumer's receipts in due order (the
// claimable index's order) jump between rows inserted far apart: the worst case for an
// index-only scan whose rows sit among retained ones (the ratio lines). accept_order: due
// times rise with g, as PENDING receipts' do when accept() records them one after the
// other (available_at = the time of the accept): index order follows insertion order.
enum class BacklogOrder { permuted, accept_order };

// What the loaded schema's backlog indexes (the partial ones that no retained COMPLETED
// receipt or PUBLISHED event is in) start from before a collector measurement. The empty
// schema's are always rebuilt, by its TRUNCATE.
// - rebuilt: REINDEXed too, so both schemas' backlog indexes start from the same state
//   and the comparison shows what the retained rows cost. Left as they were, they keep
//   the pages and levels of the largest backlog the loaded schema has held (an earlier
//   stage's accept rounds left tens of thousands of PENDING entries at once), which the
//   empty side's TRUNCATE does not.
// - as_left: as the earlier cases left them (the after_churn_ measurement).
enum class BacklogIndexes { rebuilt, as_left };

// The loaded schema's backlog indexes: inbox_receipts' and outbox_events' partial
// indexes whose predicate admits neither retained status.
void rebuild_backlog_indexes(const std::string& url, const char* schema) {
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  const std::string tables =
      "'" + table(schema, "inbox_receipts") + "'::regclass, '" + table(schema, "outbox_events") + "'::regclass";
  const pqxx::result indexes = n.exec(
      "SELECT pg_catalog.format('%I.%I', ns.nspname, ic.relname) FROM pg_catalog.pg_index AS i "
      "JOIN pg_catalog.pg_class AS ic ON ic.oid = i.indexrelid "
      "JOIN pg_catalog.pg_namespace AS ns ON ns.oid = ic.relnamespace "
      "WHERE i.indrelid IN (" +
      tables +
      ") AND i.indpred IS NOT NULL "
      "AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) !~ '(COMPLETED|PUBLISHED)' ORDER BY 1");
  if (indexes.empty()) throw std::runtime_error(std::string("no backlog index found in ") + schema);
  for (const auto& row : indexes) n.exec(std::string("REINDEX INDEX ") + row[0].c_str());
}

// The same small backlog in both schemas: PENDING and RETRYABLE receipts over 4
// consumers, some PROCESSING and DEAD; PENDING, PUBLISHING and DEAD events. Rows have the
// retained rows' sizes: much smaller rows would each fit in the few hundred bytes a full
// retained page has left, one per page (docs/benchmarks.md, "Where a backlog lands").
void load_collector_backlog(const std::string& url, BacklogOrder order, BacklogIndexes indexes) {
  const std::string due = order == BacklogOrder::permuted ? "now() - (g % 600) * interval '1 second'"
                                                          : "now() - (2401 - g) * interval '250 milliseconds'";
  Admin admin(url);
  admin.exec(kShapes);
  for (const char* schema : {kEmpty, kLoaded}) {
    // Everything but the retained rows goes. The empty schema's tables are made empty
    // again, heap and indexes: after a DELETE, the earlier stages' churn stays in them as
    // pages (a first outbox partition of 7,773 pages for 2,150 rows, a due index of 2,248
    // pages for 2,000 entries), and the planner, costing those pages, chose a sequential
    // scan there: the baseline was then a bloated table, not an empty one.
    const bool empty = std::string(schema) == kEmpty;
    if (empty) {
      admin.exec("TRUNCATE " + table(schema, "inbox_receipts") + ", " + table(schema, "outbox_events"));
    } else {
      admin.exec("DELETE FROM " + table(schema, "inbox_receipts") + " WHERE status <> 'COMPLETED'");
      admin.exec("DELETE FROM " + table(schema, "outbox_events") + " WHERE status <> 'PUBLISHED'");
      if (indexes == BacklogIndexes::rebuilt) rebuild_backlog_indexes(url, schema);
    }
    admin.exec(
        "INSERT INTO " + table(schema, "inbox_receipts") +
        " (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, "
        "fingerprint, status, available_at, claim_token, lease_expires_at, dead_reason, attempts) "
        "SELECT 'tenant', 'tenant-' || (g % 50), 'backlog', 'c' || (g % 4), 'b-' || g, 'e', 1, sh.payload, "
        "sh.fingerprint, s, " +
        due +
        ", "
        "CASE WHEN s = 'PROCESSING' THEN gen_random_uuid() END, "
        "CASE WHEN s = 'PROCESSING' THEN now() + interval '1 hour' END, "
        "CASE WHEN s = 'DEAD' THEN 'HANDLER_PERMANENT' END, 1 "
        "FROM generate_series(1, 2400) g JOIN growth_shapes AS sh ON sh.k = g % 1009 CROSS JOIN LATERAL (SELECT CASE WHEN g <= 2000 THEN 'PENDING' "
        "WHEN g <= 2200 THEN 'RETRYABLE' WHEN g <= 2300 THEN 'PROCESSING' ELSE 'DEAD' END AS s) AS st");
    admin.exec(
        "INSERT INTO " + table(schema, "outbox_events") +
        " (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, payload, "
        "status, claim_token, lease_expires_at, dead_reason, ordered) "
        "SELECT " +
        boxcar::bench::uuid_v7_sql("pg_catalog.now()") +
        ", 'e', 1, 't', 'k', 'global', '', sh.payload::text, s, "
        "CASE WHEN s = 'PUBLISHING' THEN gen_random_uuid() END, "
        "CASE WHEN s = 'PUBLISHING' THEN now() + interval '1 hour' END, "
        "CASE WHEN s = 'DEAD' THEN 'ATTEMPTS_EXHAUSTED' END, false "
        "FROM generate_series(1, 2150) g JOIN growth_shapes AS sh ON sh.k = g % 1009 CROSS JOIN LATERAL (SELECT CASE WHEN g <= 2000 THEN 'PENDING' "
        "WHEN g <= 2100 THEN 'PUBLISHING' ELSE 'DEAD' END AS s) AS st");
    admin.exec("VACUUM ANALYZE " + table(schema, "inbox_receipts"));
    admin.exec("VACUUM ANALYZE " + table(schema, "outbox_events"));
  }
  admin.checkpoint();
}

constexpr const char* kClaimableIndex = "inbox_receipts_claimable";

// Where each schema's claimable backlog sits: its rows, the heap pages and visibility-map
// pages they are on (one map page per 32,672 heap pages of 8 kB), and how often a scan in
// the claimable index's order (consumer, available_at) passes to another map page. An
// index-only scan checks each entry's page in the map and keeps one map page pinned, so
// every pass is one more buffer lookup (docs/benchmarks.md, "Where a backlog lands").
// Then the claimable index's size: its pages outlast the largest backlog it has held.
std::string claimable_layout(const std::string& url) {
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  std::string out;
  for (const char* schema : {kEmpty, kLoaded}) {
    const auto row = n.exec1(
        "SELECT count(*), count(DISTINCT page), count(DISTINCT page / 32672), "
        "count(*) FILTER (WHERE page / 32672 IS DISTINCT FROM previous) "
        "FROM (SELECT page, lag(page / 32672) OVER (PARTITION BY consumer ORDER BY available_at, ctid) AS previous "
        "FROM (SELECT consumer, available_at, ctid, (ctid::text::point)[0]::bigint AS page FROM " +
        table(schema, "inbox_receipts") + " WHERE status IN ('PENDING', 'RETRYABLE')) AS r) AS l");
    const auto index_pages =
        n.exec1("SELECT pg_catalog.pg_relation_size('" + table(schema, kClaimableIndex) + "'::regclass) / 8192");
    out += std::string(out.empty() ? "" : "; ") + schema + ": " + row[0].c_str() + " rows on " + row[1].c_str() +
           " heap pages under " + row[2].c_str() + " map pages, " + row[3].c_str() +
           " map-page changes in index order, a claimable index of " + index_pages[0].c_str() + " pages";
  }
  return out;
}

// A collector query's parameter, bound as the collector binds it: the capped counts'
// $1::bigint to the default cap, any other $1 to the schema name.
std::optional<std::string> collector_parameter(const std::string& sql, const char* schema) {
  if (sql.find("$1::bigint") != std::string::npos) return std::to_string(boxcar::BacklogOptions{}.exact_cap);
  if (sql.find("$1") != std::string::npos) return std::string(schema);
  return std::nullopt;
}

class QueryRunner {
 public:
  QueryRunner(const std::string& url, const char* schema, const std::string& sql)
      : connection_(url), parameter_(collector_parameter(sql, schema)) {
    connection_.prepare("q", sql);
    for (int i = 0; i < 3; ++i) seconds();  // warm: plan cached, pages in shared buffers
  }
  int backend_pid() const { return connection_.backendpid(); }
  // One execution's wall time.
  double seconds() {
    const auto start = Clock::now();
    pqxx::nontransaction n(connection_);
    if (parameter_)
      n.exec_prepared("q", *parameter_);
    else
      n.exec_prepared("q");
    return since(start);
  }
  // One execution of this connection's prepared statement as it runs now (custom or the
  // cached generic plan), in one line: which plan kind it has run, what this execution
  // read and how long it planned; for BOXCAR_BENCH_EXPLAIN (explain_queries prints plans).
  std::string analyzed() {
    pqxx::nontransaction n(connection_);
    std::string planning, execution, buffers;
    long long heap_fetches = 0;
    for (const auto& row : n.exec("EXPLAIN (ANALYZE, BUFFERS) EXECUTE q" +
                                  (parameter_ ? "(" + n.quote(*parameter_) + ")" : std::string()))) {
      const std::string_view line = row[0].c_str();
      const auto after = [&](std::string_view label) {
        const auto at = line.find(label);
        return at == std::string_view::npos ? std::string() : std::string(line.substr(at + label.size()));
      };
      if (const auto fetches = after("Heap Fetches: "); !fetches.empty()) heap_fetches += std::stoll(fetches);
      if (const auto text = after("Planning Time: "); !text.empty()) planning = text;
      if (const auto text = after("Execution Time: "); !text.empty()) execution = text;
      if (const auto text = after("Buffers: "); !text.empty() && buffers.empty()) buffers = text;
    }
    const auto counts = n.exec1("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name = 'q'");
    return "planning " + planning + ", execution " + execution + ", buffers " + buffers + ", heap fetches " +
           std::to_string(heap_fetches) + ", generic plans " + counts[0].c_str() + ", custom " + counts[1].c_str() +
           "\n";
  }

 private:
  pqxx::connection connection_;
  std::optional<std::string> parameter_;
};

// One query of both schemas, as one case.
struct QueryPair {
  std::string name, empty_sql, loaded_sql;
};

// This thread and the given backends on the CPU this thread runs on, for as long as it
// lives. A query's round trip wakes its backend and then this thread, and on this VM a
// wake-up across cores is dear (pgbench: up to 1.8x the round trip of one core). Unpinned,
// one connection's rounds ran up to 2x slower for seconds while the one alternating with it
// did not, with the same plan and buffers; pinned, a query's rounds agree within 1%. On one core both sides take the same path.
// Without the right to move the backends (they belong to the server's user), nothing is
// pinned and a line says so.
class PinnedToOneCpu {
 public:
  explicit PinnedToOneCpu(const std::vector<int>& backends) {
    if (sched_getaffinity(0, sizeof previous_, &previous_) != 0) return;
    const int cpu = sched_getcpu();
    if (cpu < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    for (std::size_t i = 0; i < backends.size(); ++i) {
      if (sched_setaffinity(backends[i], sizeof one, &one) != 0) {
        // Both sides unpinned alike: the backends pinned so far get this thread's CPUs back.
        for (std::size_t j = 0; j < i; ++j) sched_setaffinity(backends[j], sizeof previous_, &previous_);
        std::cout << "  (query timing unpinned: cannot set the backends' CPU affinity)" << std::endl;
        return;
      }
    }
    pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~PinnedToOneCpu() {
    if (pinned_) sched_setaffinity(0, sizeof previous_, &previous_);
  }
  PinnedToOneCpu(const PinnedToOneCpu&) = delete;
  PinnedToOneCpu& operator=(const PinnedToOneCpu&) = delete;

 private:
  cpu_set_t previous_{};
  bool pinned_ = false;
};

// Queries of both schemas, each in kQueryRounds rounds of kQueryRuns executions per side,
// the two sides alternating execution by execution (each goes first every other time, so
// neither always runs while the other's backend is still finishing its statement). A
// round's rate per side is 1/its fastest execution: on 2 cores shared with other work a
// sub-millisecond query's median carries more scheduling noise than query cost (medians
// are printed too). Every query's round 1 runs before any round 2, so one query's rounds
// are spread over the seconds the whole set takes, not packed into the few milliseconds
// one round takes, and the ratio is the loaded side's median round rate over the empty
// side's, like every other case's medians of rounds (docs/benchmarks.md, "How a
// measurement is made"). Reported as executions/s: higher is better.
std::vector<CaseResult> measure_queries(const std::string& url, const std::vector<QueryPair>& queries,
                                        const std::string& detail) {
  std::vector<std::pair<std::unique_ptr<QueryRunner>, std::unique_ptr<QueryRunner>>> runners;
  std::vector<CaseResult> results;
  for (const auto& q : queries) {
    runners.emplace_back(std::make_unique<QueryRunner>(url, kEmpty, q.empty_sql),
                         std::make_unique<QueryRunner>(url, kLoaded, q.loaded_sql));
    results.push_back({.name = q.name, .detail = detail});
  }
  std::vector<int> backends;
  for (const auto& [empty, loaded] : runners) {
    backends.push_back(empty->backend_pid());
    backends.push_back(loaded->backend_pid());
  }
  const PinnedToOneCpu pinned(backends);
  std::vector<std::vector<double>> empty_medians(queries.size()), loaded_medians(queries.size());
  for (int round = 0; round < kQueryRounds; ++round) {
    for (std::size_t q = 0; q < queries.size(); ++q) {
      auto& [empty, loaded] = runners[q];
      std::vector<double> empty_s, loaded_s;
      for (int i = 0; i < kQueryRuns; ++i) {
        if ((round + i) % 2) {
          empty_s.push_back(empty->seconds());
          loaded_s.push_back(loaded->seconds());
        } else {
          loaded_s.push_back(loaded->seconds());
          empty_s.push_back(empty->seconds());
        }
      }
      results[q].baseline.push_back(1 / *std::min_element(empty_s.begin(), empty_s.end()));
      results[q].boxcar.push_back(1 / *std::min_element(loaded_s.begin(), loaded_s.end()));
      empty_medians[q].push_back(boxcar::bench::median(empty_s));
      loaded_medians[q].push_back(boxcar::bench::median(loaded_s));
      if (const char* only = std::getenv("BOXCAR_BENCH_EXPLAIN");
          only && queries[q].name.find(only) != std::string::npos)
        std::cout << "  " << queries[q].name << " round " << round + 1 << " fastest "
                  << fixed(1000 * *std::min_element(empty_s.begin(), empty_s.end()), 3) << " / "
                  << fixed(1000 * *std::min_element(loaded_s.begin(), loaded_s.end()), 3)
                  << " ms; then empty: " << empty->analyzed() << "    loaded: " << loaded->analyzed();
    }
  }
  for (std::size_t q = 0; q < queries.size(); ++q) {
    const CaseResult& r = results[q];
    std::cout << "  " << r.name << ": " << kQueryRounds << " rounds of " << kQueryRuns
              << " executions each: fastest per round, median empty " << fixed(1000 / r.baseline_median(), 3)
              << " ms, loaded " << fixed(1000 / r.boxcar_median(), 3) << " ms (ratio " << fixed(r.ratio(), 2)
              << "; rounds";
    for (int round = 0; round < kQueryRounds; ++round)
      std::cout << " "
                << fixed(r.boxcar[static_cast<std::size_t>(round)] / r.baseline[static_cast<std::size_t>(round)], 2);
    std::cout << "); median execution " << fixed(boxcar::bench::median(empty_medians[q]) * 1000, 3) << " / "
              << fixed(boxcar::bench::median(loaded_medians[q]) * 1000, 3) << " ms" << std::endl;
  }
  return results;
}

// BOXCAR_BENCH_EXPLAIN=SUBSTRING prints, before the collector cases whose name contains
// it, each side's EXPLAIN (ANALYZE, BUFFERS) of the statement as QueryRunner prepares and
// binds it: which pages the loaded side reads that the empty one does not.
void explain_queries(const std::string& url, const std::vector<QueryPair>& queries, const std::string& only) {
  pqxx::connection c(url);
  for (const auto& q : queries) {
    if (q.name.find(only) == std::string::npos) continue;
    for (const auto& [side, sql] : {std::pair{kEmpty, q.empty_sql}, std::pair{kLoaded, q.loaded_sql}}) {
      c.prepare("explained", sql);
      c.prepare_now("explained");  // server side now: EXECUTE below names it in SQL
      pqxx::nontransaction n(c);
      const auto parameter = collector_parameter(sql, side);
      // Both plans a prepared statement can run: the custom one of its first executions,
      // and the generic one PostgreSQL may switch to from the sixth on.
      for (const char* mode : {"force_custom_plan", "force_generic_plan"}) {
        n.exec0(std::string("SET plan_cache_mode = ") + mode);
        std::cout << "  explain " << q.name << " (" << side << ", " << mode << "):\n";
        for (const auto& row : n.exec("EXPLAIN (ANALYZE, BUFFERS) EXECUTE explained" +
                                      (parameter ? "(" + n.quote(*parameter) + ")" : std::string())))
          std::cout << "    " << row[0].c_str() << "\n";
      }
      n.exec0("RESET plan_cache_mode");
      c.unprepare("explained");
    }
  }
  std::cout << std::flush;
}

// ---- one stage -------------------------------------------------------------------------

std::vector<CaseResult> measure_stage(const std::string& url, const std::string& bootstrap, long long rows,
                                      const boxcar::bench::Options& options, int messages, int events) {
  const int rounds = std::min(options.rounds, 3);
  const std::string at = " at " + std::to_string(rows) + " rows";
  std::vector<CaseResult> results;
  Admin admin(url);
  // Only the retained rows stay in the loaded schema: the last stage's backlog goes.
  admin.exec("DELETE FROM " + table(kLoaded, "inbox_receipts") + " WHERE status <> 'COMPLETED'");
  admin.exec("DELETE FROM " + table(kLoaded, "outbox_events") + " WHERE status <> 'PUBLISHED'");

  // The collector's queries over a fresh backlog, appended after the retained rows as an
  // incident's backlog piles up; then again after the churn of the cases above
  // (informational, no ratio line: docs/benchmarks.md, "Where a backlog lands").
  const auto collector = [&](const std::string& prefix, BacklogIndexes indexes) {
    load_collector_backlog(url, BacklogOrder::permuted, indexes);
    std::cout << "  " << prefix << "claimable backlog: " << claimable_layout(url) << std::endl;
    const auto empty_queries = boxcar::BacklogCollector::queries(kEmpty);
    const auto loaded_queries = boxcar::BacklogCollector::queries(kLoaded);
    std::vector<QueryPair> pairs;
    for (std::size_t i = 0; i < empty_queries.size(); ++i) {
      // The snapshot row's statements are primary-key reads and writes of a two-row table
      // whatever the tables hold (and the claim would wait for the elected collector).
      if (empty_queries[i].name.starts_with("snapshot_")) continue;
      pairs.push_back(
          {"growth_collector_" + prefix + empty_queries[i].name, empty_queries[i].sql, loaded_queries[i].sql});
    }
    if (const char* only = std::getenv("BOXCAR_BENCH_EXPLAIN")) explain_queries(url, pairs, only);
    for (auto& r : measure_queries(url, pairs, kQueryDetail + at)) results.push_back(std::move(r));
  };
  collector("", BacklogIndexes::rebuilt);
  // The claimable count again, over a backlog whose due times follow its insertion order
  // (BacklogOrder::accept_order), in the same free space the one above used.
  {
    load_collector_backlog(url, BacklogOrder::accept_order, BacklogIndexes::rebuilt);
    std::cout << "  claimable backlog in accept order: " << claimable_layout(url) << std::endl;
    const auto query = [](const char* schema) {
      for (const auto& q : boxcar::BacklogCollector::queries(schema))
        if (q.name == "inbox_claimable") return q.sql;
      throw std::logic_error("BacklogCollector::queries has no inbox_claimable");
    };
    const std::vector<QueryPair> pair{{kClaimableAcceptOrderCase, query(kEmpty), query(kLoaded)}};
    if (const char* only = std::getenv("BOXCAR_BENCH_EXPLAIN")) explain_queries(url, pair, only);
    for (auto& r : measure_queries(url, pair, kQueryDetail + ", due times in insertion order" + at))
      results.push_back(std::move(r));
  }
  {
    AcceptSide empty{boxcar::ConnectionPool::create({.url = url, .size = kAcceptThreads}), nullptr};
    empty.inbox =
        std::make_unique<boxcar::Inbox>(empty.pool, boxcar::InboxOptions{.schema = kEmpty, .consumers = {kConsumer}});
    AcceptSide loaded{boxcar::ConnectionPool::create({.url = url, .size = kAcceptThreads}), nullptr};
    loaded.inbox =
        std::make_unique<boxcar::Inbox>(loaded.pool, boxcar::InboxOptions{.schema = kLoaded, .consumers = {kConsumer}});
    accept_for(empty, 0.5);  // warm-up: every connection opened, statements prepared
    accept_for(loaded, 0.5);
    results.push_back(boxcar::bench::compare(
        "growth_accept", "accept() 16 threads, msg/s, loaded vs empty" + at, rounds, [&] { reset_accept(admin); },
        [&] { return accept_for(empty, options.seconds); }, [&] { return accept_for(loaded, options.seconds); },
        std::cout));
    reset_accept(admin);
  }

  results.push_back(boxcar::bench::compare(
      "growth_batched_t16", "drain, batch 32, 16 threads, msg/s, loaded vs empty" + at, rounds,
      [&] { load_backlog(url, messages); }, [&] { return drain(url, kEmpty, messages); },
      [&] { return drain(url, kLoaded, messages); }, std::cout));

  // An idle worker's claim right after the drains: nothing is due, so the claim's index
  // scan reads every entry of the consumer's range that vacuum has not removed yet, the
  // dead entries of the claims before it (docs/benchmarks.md, "Where a backlog lands").
  const auto claim_select = [](const char* schema) {
    return "SELECT id FROM " + table(schema, "inbox_receipts") + " WHERE consumer = '" + kConsumer +
           "' AND status IN ('PENDING', 'RETRYABLE') AND available_at <= now() AND NOT suspect "
           "ORDER BY available_at LIMIT 32 FOR NO KEY UPDATE SKIP LOCKED";
  };
  for (auto& r : measure_queries(url, {{kIdleClaimCase, claim_select(kEmpty), claim_select(kLoaded)}},
                                 kQueryDetail + ", claim with nothing due, after the drains" + at))
    results.push_back(std::move(r));

  results.push_back(boxcar::bench::compare(
      "growth_publisher", "publisher batch 1000, events/s, loaded vs empty, events in a daily partition" + at, rounds,
      [] {}, [&] { return publish(url, bootstrap, kEmpty, events, EventsLand::daily_partition); },
      [&] { return publish(url, bootstrap, kLoaded, events, EventsLand::daily_partition); }, std::cout));
  results.push_back(boxcar::bench::compare(
      kPublisherLegacyCase,
      "publisher batch 1000, events/s, loaded vs empty, events beside the retained ones in "
      "outbox_events_legacy" +
          at,
      rounds, [] {}, [&] { return publish(url, bootstrap, kEmpty, events, EventsLand::legacy_partition); },
      [&] { return publish(url, bootstrap, kLoaded, events, EventsLand::legacy_partition); }, std::cout));

  collector("after_churn_", BacklogIndexes::as_left);
  return results;
}

std::vector<long long> parse_rows(const std::string& text) {
  std::vector<long long> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    std::size_t used = 0;
    long long value = -1;
    try {
      value = std::stoll(part, &used);
    } catch (const std::exception&) {
    }
    if (used != part.size() || value < 1 || (!out.empty() && value <= out.back()))
      throw boxcar::bench::UsageError("--rows needs increasing positive sizes, e.g. 200000,2000000; got '" + text +
                                      "'");
    out.push_back(value);
  }
  if (out.empty()) throw boxcar::bench::UsageError("--rows needs at least one size");
  // One size N: measure at N/10 too, for the slope.
  if (out.size() == 1 && out[0] >= 10) out.insert(out.begin(), out[0] / 10);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::string rows_text = std::to_string(kDefaultRows);
    int messages = 20000;
    int events = 50000;
    std::vector<char*> rest{argv[0]};
    for (int i = 1; i < argc; ++i) {
      const std::string flag = argv[i];
      if (flag == "--rows" && i + 1 < argc)
        rows_text = argv[++i];
      else if (flag == "--messages" && i + 1 < argc)
        messages = std::stoi(argv[++i]);
      else if (flag == "--events" && i + 1 < argc)
        events = std::stoi(argv[++i]);
      else
        rest.push_back(argv[i]);
    }
    const auto stages = parse_rows(rows_text);
    spdlog::set_level(spdlog::level::warn);  // the workers' start/stop lines would bury the rounds
    auto options = boxcar::bench::parse_options(static_cast<int>(rest.size()), rest.data());
    const std::string& url = options.database_url;
    const auto run_start = Clock::now();

    for (const char* schema : {kEmpty, kLoaded}) {
      Admin(url).exec(std::string("DROP SCHEMA IF EXISTS ") + schema + " CASCADE");
      boxcar::migrate(url, {.schema = schema});
      Admin(url).exec("CREATE TABLE " + table(schema, "app_rows") +
                      " (message_id text NOT NULL, attempt int NOT NULL)");
    }

    char error[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", error, sizeof error);
    rd_kafka_conf_set(conf, "socket.nagle.disable", "true", error, sizeof error);
    rd_kafka_t* mock_handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
    rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(mock_handle, 3);
    rd_kafka_mock_topic_create(cluster, kTopic, 4, 3);
    const std::string bootstrap = rd_kafka_mock_cluster_bootstraps(cluster);

    std::string stage_list;
    for (const long long rows : stages) stage_list += (stage_list.empty() ? "" : ", ") + std::to_string(rows);
    std::cout << "bench_growth: retained rows per table at each stage: " << stage_list << "; "
              << std::min(options.rounds, 3)
              << " interleaved rounds per case (empty schema, then loaded), medians; accept " << options.seconds
              << " s per measurement, drain " << messages << " messages, publish " << events << " events" << std::endl;
    std::vector<CaseResult> last;
    long long loaded_rows = 0;
    for (const long long rows : stages) {
      std::cout << "\nstage " << rows << " retained rows per table: " << std::flush;
      std::cout << grow(url, loaded_rows, rows, stages.back()) << std::endl;
      loaded_rows = rows;
      std::cout << "  " << sizes(url) << std::endl;
      last = measure_stage(url, bootstrap, rows, options, messages, events);
      std::cout << "\n";
      boxcar::bench::print_table(std::cout, last);
      std::cout << "  (stage done " << fixed(since(run_start), 0) << " s after start)" << std::endl;
    }
    std::cout << "\n";
    for (const auto& r : last) {
      if (r.name.find("after_churn") != std::string::npos) continue;
      if (informational(r.name))
        boxcar::bench::print_info_line(std::cout, r);
      else
        boxcar::bench::print_ratio_line(std::cout, r, r.name == kClaimableCase ? kClaimableTarget : kTarget);
    }
    rd_kafka_mock_cluster_destroy(cluster);
    rd_kafka_destroy(mock_handle);
    return 0;
  } catch (const boxcar::bench::UsageError& e) {
    std::cerr << e.what() << "\n"
              << boxcar::bench::usage(argv[0]) << " [--rows N[,N2...]] [--messages M] [--events E]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "bench_growth failed: " << e.what() << "\n";
    return 1;
  }
}
