// The search_path attack of docs/security.md section 1 (CVE-2018-1058 class), end to end.
// A low-privilege role with CREATE on one schema plants a look-alike of every built-in
// Boxcar calls (each pg_catalog signature of each name, aggregates included), operators for
// the operand types Boxcar uses wherever pg_catalog has no exact match (where an implicit
// cast would let a plant win), and grammar look-alikes (coalesce, greatest, ...). Every
// plant records its call in a table and in a sequence (which a rollback does not undo).
// Boxcar then runs with that schema FIRST on its search_path, before pg_catalog, so an
// unqualified call would reach a plant even with identical argument types: migrate,
// accept and accept_many, the worker (single and batch, retries, a permanent failure,
// lease recovery and the suspect lane), the outbox, the publisher through librdkafka's mock
// cluster (a failed delivery first), the backlog collector and the operator commands
// (status, dead list/groups/show/retry/discard, purge). The pipeline must finish, counted
// in rows, and no plant may ever have been called. Handlers keep the application's
// search_path: Boxcar qualifies instead of setting one.
#include <catch2/catch.hpp>

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/detail/named_statements.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "boxcar/core/metrics.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/inbox/detail/named_statements.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/ops/detail/named_statements.hpp"
#include "boxcar/ops/operator.hpp"
#include "boxcar/outbox/detail/named_statements.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/detail/named_statements.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/detail/named_statements.hpp"
#include "boxcar/testing/lambda_handler.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "order_events.hpp"
#include "sql_function_calls.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kOrders = "orders.projection.v1";

// Every built-in Boxcar calls: the pg_catalog.<name>( tokens of all its statements (the
// static check, builtin_qualification_test.cpp, makes sure there is no other kind), plus
// extract/date_part, which the parser writes for EXTRACT.
std::set<std::string> builtins_boxcar_calls() {
  std::set<std::string> names = {"extract", "date_part"};
  for (const auto& part : {detail::core_statements(), detail::core_unprepared_statements(), detail::inbox_statements(),
                           detail::outbox_statements(), detail::publisher_statements(), detail::ops_statements(),
                           detail::testing_statements()})
    for (const auto& statement : part)
      for (const auto& call : sql_calls(statement.sql))
        if (call.name.rfind("pg_catalog.", 0) == 0) names.insert(call.name.substr(11));
  return names;
}

std::string joined(const std::set<std::string>& names) {
  std::string out;
  for (const auto& name : names) out += (out.empty() ? "" : ",") + name;
  return out;
}

// Run by the planting role; {planted} is its schema. The log survives in the sequence even
// when the statement that called a plant rolled back.
constexpr const char* kPlantLog = R"sql(
CREATE TABLE {planted}.calls (called text NOT NULL);
CREATE SEQUENCE {planted}.call_count;
CREATE TABLE {planted}.skipped (signature text NOT NULL, why text NOT NULL);
GRANT INSERT, SELECT ON {planted}.calls TO PUBLIC;
GRANT USAGE, SELECT, UPDATE ON {planted}.call_count TO PUBLIC;
CREATE FUNCTION {planted}.record_call(what text) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
  PERFORM pg_catalog.nextval('{planted}.call_count');
  INSERT INTO {planted}.calls (called) VALUES (what);
END $f$;
)sql";

// One look-alike per pg_catalog signature of each name in boxcar_plant.names: functions
// copy the arguments (names, defaults, OUT, VARIADIC) and result; aggregates get a planted
// transition function. PL/pgSQL cannot take "any": those signatures are planted with
// text (VARIADIC text[]) / anyelement instead, which an unqualified call would match as
// well or better. What still cannot be planted is listed in {planted}.skipped.
constexpr const char* kPlantFunctions = R"sql(
DO $plant$
DECLARE
  p record;
  n integer := 0;
  args text;
  identity_args text;
  stype text;
  body text;
BEGIN
  FOR p IN
    SELECT f.proname, f.prokind, f.pronargs, f.proargtypes,
           pg_catalog.pg_get_function_arguments(f.oid) AS args,
           pg_catalog.pg_get_function_identity_arguments(f.oid) AS identity_args,
           pg_catalog.pg_get_function_result(f.oid) AS result
    FROM pg_catalog.pg_proc AS f
    WHERE f.pronamespace = 'pg_catalog'::pg_catalog.regnamespace
      AND f.proname OPERATOR(pg_catalog.=) ANY (pg_catalog.string_to_array(
              pg_catalog.current_setting('boxcar_plant.names'), ','))
    ORDER BY f.proname, f.oid
  LOOP
    n := n + 1;
    args := pg_catalog.replace(pg_catalog.replace(p.args, 'VARIADIC "any"', 'VARIADIC text[]'), '"any"', 'anyelement');
    identity_args := pg_catalog.replace(pg_catalog.replace(p.identity_args, 'VARIADIC "any"', 'VARIADIC text[]'),
                                        '"any"', 'anyelement');
    body := pg_catalog.format('BEGIN PERFORM {planted}.record_call(%L); RETURN%s; END',
                              p.proname || '(' || p.identity_args || ')',
                              CASE WHEN p.result LIKE 'SETOF %' OR p.result = 'void' OR p.args LIKE '%OUT %'
                                   THEN '' ELSE ' NULL' END);
    BEGIN
      IF p.prokind = 'a' THEN
        stype := CASE WHEN p.pronargs = 0 THEN 'bigint'
                      WHEN pg_catalog.format_type(p.proargtypes[0], NULL) = '"any"' THEN 'anyelement'
                      ELSE pg_catalog.format_type(p.proargtypes[0], NULL) END;
        EXECUTE pg_catalog.format('CREATE FUNCTION {planted}.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
          'plant_sfunc_' || n,
          'state ' || stype || CASE WHEN p.pronargs = 0 THEN '' ELSE ', ' || identity_args END, stype,
          pg_catalog.format('BEGIN PERFORM {planted}.record_call(%L); RETURN state; END',
                            p.proname || '(' || p.identity_args || ')'));
        EXECUTE pg_catalog.format('CREATE AGGREGATE {planted}.%I(%s) (SFUNC = {planted}.%I, STYPE = %s)',
          p.proname, CASE WHEN p.pronargs = 0 THEN '*' ELSE identity_args END, 'plant_sfunc_' || n, stype);
      ELSIF p.prokind IN ('f', 'w') THEN
        EXECUTE pg_catalog.format('CREATE FUNCTION {planted}.%I(%s) RETURNS %s LANGUAGE plpgsql AS %L',
          p.proname, args, p.result, body);
      END IF;
    EXCEPTION WHEN OTHERS THEN
      INSERT INTO {planted}.skipped VALUES (p.proname || '(' || p.identity_args || ')', SQLERRM);
    END;
  END LOOP;
END
$plant$;
-- Grammar that only looks like a call: never looked up, so these are never called.
CREATE FUNCTION {planted}."coalesce"(anyelement, anyelement) RETURNS anyelement LANGUAGE plpgsql
    AS $f$BEGIN PERFORM {planted}.record_call('coalesce'); RETURN NULL; END$f$;
CREATE FUNCTION {planted}."greatest"(anyelement, anyelement) RETURNS anyelement LANGUAGE plpgsql
    AS $f$BEGIN PERFORM {planted}.record_call('greatest'); RETURN NULL; END$f$;
CREATE FUNCTION {planted}."least"(anyelement, anyelement) RETURNS anyelement LANGUAGE plpgsql
    AS $f$BEGIN PERFORM {planted}.record_call('least'); RETURN NULL; END$f$;
CREATE FUNCTION {planted}."nullif"(anyelement, anyelement) RETURNS anyelement LANGUAGE plpgsql
    AS $f$BEGIN PERFORM {planted}.record_call('nullif'); RETURN NULL; END$f$;
)sql";

// Every operator Boxcar's statements use, for every pair of the operand types they use,
// where pg_catalog has no operator of exactly those types: there an implicit cast decides,
// and a planted exact match would win wherever it stands on the search_path. (Where
// pg_catalog has the exact operator it wins as long as it is searched first, PostgreSQL's
// default: docs/security.md says why and what that leaves to the deployment.)
constexpr const char* kPlantOperators = R"sql(
DO $plant$
DECLARE
  types text[] := ARRAY['text', 'name', '"char"', 'smallint', 'integer', 'bigint', 'numeric', 'double precision',
                        'real', 'boolean', 'uuid', 'timestamp with time zone', 'interval', 'jsonb', 'xid8', 'oid',
                        'regclass'];
  op text;
  l text;
  r text;
  n integer := 0;
BEGIN
  FOREACH op IN ARRAY ARRAY['=', '<>', '<', '<=', '>', '>=', '+', '-', '*', '/', '||', '<<', '|'] LOOP
    FOREACH l IN ARRAY types LOOP
      FOREACH r IN ARRAY types LOOP
        CONTINUE WHEN EXISTS (
            SELECT 1 FROM pg_catalog.pg_operator AS o
            WHERE o.oprnamespace OPERATOR(pg_catalog.=) 'pg_catalog'::pg_catalog.regnamespace
              AND o.oprname OPERATOR(pg_catalog.=) op
              AND o.oprleft OPERATOR(pg_catalog.=) l::pg_catalog.regtype
              AND o.oprright OPERATOR(pg_catalog.=) r::pg_catalog.regtype);
        n := n + 1;
        EXECUTE pg_catalog.format('CREATE FUNCTION {planted}.%I(%s, %s) RETURNS %s LANGUAGE plpgsql AS %L',
          'plant_operator_' || n, l, r,
          CASE WHEN op IN ('=', '<>', '<', '<=', '>', '>=') THEN 'boolean' WHEN op = '||' THEN 'text' ELSE l END,
          pg_catalog.format('BEGIN PERFORM {planted}.record_call(%L); RETURN NULL; END',
                            'operator ' || l || ' ' || op || ' ' || r));
        EXECUTE pg_catalog.format('CREATE OPERATOR {planted}.%s (LEFTARG = %s, RIGHTARG = %s, FUNCTION = {planted}.%I)',
          op, l, r, 'plant_operator_' || n);
      END LOOP;
    END LOOP;
  END LOOP;
END
$plant$;
)sql";

// A schema, a LOGIN role that may only create in it, and its plants; all dropped again.
// Names come from the test's own schema, so parallel tests never share a role.
class PlantedSchema {
 public:
  PlantedSchema(const TestDatabase& db, const std::set<std::string>& builtins)
      : url_(db.url()), schema_(db.schema() + "_planted"), role_(db.schema() + "_planter") {
    auto c = db.connect();
    pqxx::nontransaction admin(c);
    admin.exec("CREATE ROLE " + quote_identifier(role_) + " LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE");
    admin.exec("CREATE SCHEMA " + quote_identifier(schema_));
    admin.exec("GRANT USAGE ON SCHEMA " + quote_identifier(schema_) + " TO PUBLIC");
    admin.exec("GRANT CREATE ON SCHEMA " + quote_identifier(schema_) + " TO " + quote_identifier(role_));
    admin.exec("SET ROLE " + quote_identifier(role_));
    admin.exec_params("SELECT pg_catalog.set_config('boxcar_plant.names', $1, false)", joined(builtins));
    for (const char* sql : {kPlantLog, kPlantFunctions, kPlantOperators}) admin.exec(planted(sql));
    admin.exec("RESET ROLE");
  }
  ~PlantedSchema() {
    try {
      pqxx::connection c(url_);
      pqxx::nontransaction admin(c);
      admin.exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema_) + " CASCADE");
      admin.exec("DROP OWNED BY " + quote_identifier(role_));
      admin.exec("DROP ROLE IF EXISTS " + quote_identifier(role_));
    } catch (...) {
      // A leftover role in the throw-away test cluster is harmless; a destructor must not throw.
    }
  }
  PlantedSchema(const PlantedSchema&) = delete;
  PlantedSchema& operator=(const PlantedSchema&) = delete;

  // The search_path an application could give its sessions: the planted schema first,
  // pg_catalog named explicitly after it (so it is not searched first), then public.
  std::string hijacked_url() const {
    const auto separator = url_.find('?') == std::string::npos ? "?" : "&";
    return url_ + separator + "options=-csearch_path%3D" + schema_ + "%2Cpg_catalog%2Cpublic";
  }
  // Which plants exist, were skipped and were called, read on a clean session.
  std::int64_t planted_count() const {
    return scalar("SELECT pg_catalog.count(*) FROM pg_catalog.pg_proc WHERE pronamespace OPERATOR(pg_catalog.=) " +
                  pg_literal(schema_) + "::pg_catalog.regnamespace");
  }
  std::int64_t planted_operators() const {
    return scalar("SELECT pg_catalog.count(*) FROM pg_catalog.pg_operator WHERE oprnamespace OPERATOR(pg_catalog.=) " +
                  pg_literal(schema_) + "::pg_catalog.regnamespace");
  }
  std::vector<std::string> rows(const std::string& sql) const {
    pqxx::connection c(url_);
    std::vector<std::string> out;
    for (const auto& row : pqxx::nontransaction(c).exec(planted(sql))) out.push_back(row[0].as<std::string>());
    return out;
  }
  // What a session of hijacked_url() reports as its search_path, as a SQL literal.
  std::string application_search_path() const {
    pqxx::connection c(hijacked_url());
    pqxx::nontransaction tx(c);
    return tx.quote(tx.exec1("SELECT pg_catalog.current_setting('search_path')")[0].as<std::string>());
  }
  std::vector<std::string> called() const { return rows("SELECT DISTINCT called FROM {planted}.calls ORDER BY 1"); }
  bool ever_called() const { return rows("SELECT is_called::text FROM {planted}.call_count")[0] == "true"; }

 private:
  std::string planted(std::string sql) const {
    const std::string quoted = quote_identifier(schema_);
    for (auto at = sql.find("{planted}"); at != std::string::npos; at = sql.find("{planted}", at + quoted.size()))
      sql.replace(at, 9, quoted);
    return sql;
  }
  static std::string pg_literal(const std::string& s) { return "'" + s + "'"; }  // test names: [a-z0-9_]
  std::int64_t scalar(const std::string& sql) const {
    pqxx::connection c(url_);
    return pqxx::nontransaction(c).exec1(sql)[0].as<std::int64_t>();
  }

  std::string url_;
  std::string schema_;
  std::string role_;
};

AcceptRequest order(const std::string& id) {
  return {.scope = Scope::tenant("tenant-7"),
          .source = "orders-service",
          .consumer = kOrders,
          .message_id = id,
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", id}}};
}

}  // namespace

TEST_CASE(
    "functions and operators planted before pg_catalog on the search_path are never called by migrate, "
    "accept, work, publish, collect or the operator commands",
    "[search_path]") {
  TestDatabase db;  // names the planted schema and role; assertions use its clean sessions
  const auto builtins = builtins_boxcar_calls();
  REQUIRE(builtins.count("now") == 1);
  REQUIRE(builtins.count("unnest") == 1);
  PlantedSchema planted(db, builtins);
  INFO("planted " << planted.planted_count() << " functions and " << planted.planted_operators() << " operators");
  CHECK(planted.planted_count() > 100);
  CHECK(planted.planted_operators() > 1000);
  for (const auto& skipped : planted.rows("SELECT signature || ': ' || why FROM {planted}.skipped ORDER BY 1"))
    WARN("not planted: " << skipped);
  const std::string url = planted.hijacked_url();

  // The pipeline runs in a lambda so that, should it fail, the plants it called are still
  // reported below.
  std::optional<TestSchema> app;
  auto pipeline = [&] {
    // migrate: a fresh schema (bootstrap, lock, every migration, records), then the no-op run.
    app.emplace(url);
    CHECK(migrate(url, {.schema = app->schema()}).applied.empty());
    auto count = [&](const std::string& sql) {
      pqxx::connection c(db.url());  // a clean search_path: assertions must not call plants
      return pqxx::nontransaction(c).exec1(detail::with_schema(sql, app->schema()))[0].as<std::int64_t>();
    };
    auto exec = [&](const std::string& sql) {
      pqxx::connection c(db.url());
      pqxx::nontransaction(c).exec(detail::with_schema(sql, app->schema()));
    };
    exec("CREATE TABLE {schema}.order_projection (order_id text NOT NULL, search_path text NOT NULL)");
    const std::string projection = app->qualified("{schema}.order_projection");

    auto pool = app->pool(8);
    Inbox inbox(pool, {.schema = app->schema(), .consumers = {kOrders}});  // notifies after each accept
    OutboxEmitter outbox(pool, {.schema = app->schema()});
    auto metrics = std::make_shared<Metrics>();
    BacklogCollector collector(pool, metrics, {.schema = app->schema(), .declared_consumers = {kOrders}});

    // accept and accept_many, with a duplicate through each.
    for (const auto* id : {"ok-1", "ok-2", "flaky-1", "poison-1"})
      CHECK(inbox.accept(order(id)).kind == Receipt::Kind::Accepted);
    CHECK(inbox.accept(order("ok-1")).kind == Receipt::Kind::Duplicate);
    const std::vector<AcceptRequest> batch = {order("ok-3"), order("ok-4"), order("flaky-2"), order("ok-1")};
    const auto results = inbox.accept_many(batch);
    REQUIRE(results.size() == 4);
    for (const auto& result : results) CHECK(result.ok());
    CHECK(results[3].receipt().kind == Receipt::Kind::Duplicate);
    CHECK_NOTHROW(collector.collect_once());

    // The handler: flaky-* fails its first attempt, poison-* is permanent; the rest write a
    // row in context.tx, with the search_path the handler sees, and emit an event.
    auto handle = [&](const nlohmann::json&, HandlerContext& context) {
      const std::string& id = context.message_id;
      if (id.rfind("poison", 0) == 0) throw InboxPermanentError("order " + id + " can never be projected");
      if (id.rfind("flaky", 0) == 0 && context.attempt == 1) throw std::runtime_error("upstream timed out");
      context.tx.exec("INSERT INTO " + projection +
                          " (order_id, search_path) VALUES ($1, pg_catalog.current_setting('search_path'))",
                      id);
      outbox.emit(context.tx, OrderProjected{id}, {.scope = context.scope, .causation_id = id});
    };
    auto drain_until = [&](Worker& worker, std::int64_t completed) {
      // Retries are due within a millisecond; drain() stops when nothing is due yet.
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      while (count("SELECT pg_catalog.count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") < completed &&
             std::chrono::steady_clock::now() < deadline) {
        worker.drain();
        std::this_thread::sleep_for(5ms);
      }
      return count("SELECT pg_catalog.count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'");
    };
    const WorkerOptions single{.schema = app->schema(),
                               .consumers = {kOrders},
                               .concurrency = 1,
                               .max_attempts = 3,
                               .backoff = {.base = 1ms, .cap = 1ms}};
    {
      Worker worker(pool, single,
                    {{.consumer = kOrders, .supports = {{"order.created", 1}}, .handler = handler(handle)}});
      CHECK(drain_until(worker, 6) == 6);

      // Lease recovery and the suspect lane: a claim whose solo run started and whose lease
      // expired (its worker died) takes a crash strike and runs again alone.
      CHECK(inbox.accept(order("stuck-1")).kind == Receipt::Kind::Accepted);
      exec(
          "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', claim_token = pg_catalog.gen_random_uuid(), "
          "attempts = 1, suspect = true, solo_started_at = pg_catalog.now() - interval '2 seconds', "
          "lease_expires_at = pg_catalog.now() - interval '1 second' WHERE message_id = 'stuck-1'");
      CHECK(drain_until(worker, 7) == 7);
      CHECK(count("SELECT crash_strikes FROM {schema}.inbox_receipts WHERE message_id = 'stuck-1'") == 1);
    }
    {
      // Batch mode: flaky-3 rolls its batch back, which is re-run one message per
      // transaction (renewing the waiting leases), and retried.
      WorkerOptions batched = single;
      batched.batch_size = 4;
      batched.batch_failure_mode = BatchFailureMode::Rerun;
      Worker worker(pool, batched,
                    {{.consumer = kOrders, .supports = {{"order.created", 1}}, .handler = handler(handle)}});
      const std::vector<AcceptRequest> more = {order("batch-1"), order("batch-2"), order("flaky-3"), order("batch-3")};
      for (const auto& result : inbox.accept_many(more)) CHECK(result.ok());
      CHECK(drain_until(worker, 11) == 11);
    }
    CHECK(count("SELECT pg_catalog.count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 1);
    CHECK(count("SELECT pg_catalog.count(DISTINCT order_id) FROM {schema}.order_projection") == 11);
    CHECK(count("SELECT pg_catalog.count(*) FROM {schema}.outbox_events") == 11);
    CHECK_NOTHROW(collector.collect_once());

    // Publish: the first delivery fails and, with max_attempts 1, its events go DEAD; the
    // operator retries all but one of them, discards that one, and they are published.
    MockKafka kafka;
    kafka.create_topic(std::string(OrderProjected::topic), 1);
    const PublisherOptions publishing{.schema = app->schema(),
                                      .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}},
                                      .delivery_timeout = 5s,
                                      .max_attempts = 1,
                                      .backoff = {.base = 1ms, .cap = 1ms},
                                      .poll_interval = 100ms};
    {
      kafka.fail_next_produce_requests(1, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
      Publisher publisher(pool, publishing);
      publisher.drain();
      CHECK(publisher.stats().failed + publisher.stats().dead >= 1);
    }
    const auto dead_events = count("SELECT pg_catalog.count(*) FROM {schema}.outbox_events WHERE status = 'DEAD'");
    REQUIRE(dead_events >= 1);
    CHECK_NOTHROW(collector.collect_once());

    // The operator commands, each over rows they select, filter and change.
    const auto report = status(*pool, app->schema(), {kOrders});
    CHECK_FALSE(to_json(report).empty());
    const auto dead_receipts = dead_list(*pool, app->schema(), RecordKind::Inbox, {.error_contains = "NEVER BE"});
    REQUIRE(dead_receipts.size() == 1);
    CHECK(dead_list(*pool, app->schema(), RecordKind::Inbox, {.older_than = 0s}).size() == 1);
    CHECK(dead_groups(*pool, app->schema(), RecordKind::Inbox).size() == 1);
    CHECK(dead_show(*pool, app->schema(), RecordKind::Inbox, dead_receipts[0].id).id == dead_receipts[0].id);
    CHECK(dead_retry(*pool, app->schema(), RecordKind::Inbox, {.all = true}, "alice", true).ids.size() == 1);
    CHECK(dead_discard(*pool, app->schema(), RecordKind::Inbox, {.ids = {dead_receipts[0].id}}, "alice").ids.size() ==
          1);
    const auto outbox_dead = dead_list(*pool, app->schema(), RecordKind::Outbox, {.error_contains = "author"});
    REQUIRE(static_cast<std::int64_t>(outbox_dead.size()) == dead_events);
    CHECK(dead_groups(*pool, app->schema(), RecordKind::Outbox, {.older_than = 0s}).size() == 1);
    CHECK(dead_show(*pool, app->schema(), RecordKind::Outbox, outbox_dead[0].id).id == outbox_dead[0].id);
    CHECK(dead_discard(*pool, app->schema(), RecordKind::Outbox, {.ids = {outbox_dead[0].id}}, "alice").ids.size() ==
          1);
    if (dead_events > 1)
      CHECK(dead_retry(*pool, app->schema(), RecordKind::Outbox, {.all = true}, "alice").ids.size() ==
            static_cast<std::size_t>(dead_events - 1));
    {
      PublisherOptions again = publishing;
      again.max_attempts = 0;
      Publisher publisher(pool, again);
      const auto deadline = std::chrono::steady_clock::now() + 20s;
      while (count("SELECT pg_catalog.count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") < 10 &&
             std::chrono::steady_clock::now() < deadline)
        publisher.drain();
    }
    CHECK(count("SELECT pg_catalog.count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == 10);
    CHECK(kafka.read_all(std::string(OrderProjected::topic), 10, 20s).size() >= 10);
    CHECK_NOTHROW(collector.collect_once());

    // Retention: everything settled is past it.
    exec(
        "UPDATE {schema}.inbox_receipts SET completed_at = completed_at - interval '2 days' WHERE status = 'COMPLETED'");
    exec(
        "UPDATE {schema}.outbox_events SET published_at = published_at - interval '2 days' WHERE status = 'PUBLISHED'");
    const auto dry = purge(*pool, app->schema(), {.inbox_retention = 24h, .outbox_retention = 24h, .dry_run = true});
    CHECK(dry.inbox_deleted == 11);
    CHECK(dry.outbox_deleted == 0);  // today's outbox partition is not past retention
    const auto purged = purge(*pool, app->schema(), {.inbox_retention = 24h, .outbox_retention = 24h, .batch_size = 4});
    CHECK(purged.inbox_deleted == 11);
    CHECK(purged.outbox_deleted == 0);
    CHECK(count("SELECT pg_catalog.count(*) FROM {schema}.inbox_receipts") == 1);  // the discarded DEAD one

    // Handlers saw the application's own search_path: Boxcar qualified, it set nothing.
    CHECK(count("SELECT pg_catalog.count(*) FROM {schema}.order_projection WHERE search_path <> " +
                planted.application_search_path()) == 0);
  };
  CHECK_NOTHROW(pipeline());
  app.reset();

  const auto called = planted.called();
  for (const auto& plant : called) FAIL_CHECK("Boxcar called the planted " << plant);
  CHECK(called.empty());
  CHECK_FALSE(planted.ever_called());  // also counts calls whose transaction rolled back
}

// The SECURITY DEFINER functions (the inbox's key-order trigger and settlement, the
// outbox's key-order triggers) run as the schema's owner with a pinned search_path. One
// with Boxcar's schema before pg_catalog would resolve `text = text` to an operator that a
// role able to CREATE in that schema planted there, and run it as the owner. With
// pg_catalog first (docs/security.md, section 1) the built-in one always wins.
TEST_CASE("an operator planted in Boxcar's own schema is never called by its SECURITY DEFINER functions",
          "[search_path]") {
  TestDatabase db;
  db.query("CREATE SEQUENCE {schema}.planted_calls");
  db.query(
      "CREATE FUNCTION {schema}.planted_text_eq(a text, b text) RETURNS boolean LANGUAGE plpgsql AS "
      "$$ BEGIN PERFORM pg_catalog.nextval('" +
      db.schema() + ".planted_calls'); RETURN a OPERATOR(pg_catalog.=) b; END $$");
  db.query("CREATE OPERATOR {schema}.= (LEFTARG = text, RIGHTARG = text, FUNCTION = {schema}.planted_text_eq)");
  // The planted operator works where Boxcar's schema comes first: the check below can fail.
  {
    auto c = db.connect();
    pqxx::work tx(c);
    tx.exec("SET LOCAL search_path = " + quote_identifier(db.schema()) + ", pg_catalog");
    CHECK(tx.exec1("SELECT 'a'::text = 'a'::text")[0].as<bool>());
    CHECK(tx.exec1(db.qualified("SELECT last_value FROM {schema}.planted_calls"))[0].as<std::int64_t>() == 1);
    tx.abort();
  }
  const auto calls = [&] {
    return db.scalar("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {schema}.planted_calls");
  };
  const auto before = calls();

  auto pool = db.pool(4);
  // Ordered receipts (the key-order trigger on accept, completion and the batch's settlement)
  // and ordered events (the outbox's key-order triggers on emit and publish).
  Inbox inbox(pool, {.schema = db.schema(),
                     .consumers = {kOrders},
                     .ordering = {{kOrders, {.key = OrderingKey::payload_pointer("/orderId")}}},
                     .notify = false});
  for (const auto* id : {"a-1", "a-2", "b-1", "b-2"}) {
    AcceptRequest request = order(id);
    request.payload = {{"orderId", std::string(id).substr(0, 1)}};
    CHECK(inbox.accept(request).kind == Receipt::Kind::Accepted);
  }
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false});
  const auto handle = [&](const nlohmann::json& payload, HandlerContext& context) {
    outbox.emit(context.tx, OrderProjected{payload.at("orderId").get<std::string>()},
                {.scope = context.scope, .key = payload.at("orderId").get<std::string>()});
  };
  for (const std::size_t batch_size : {std::size_t{1}, std::size_t{2}}) {
    Worker worker(pool, {.schema = db.schema(), .consumers = {kOrders}, .concurrency = 1, .batch_size = batch_size},
                  {{.consumer = kOrders, .supports = {{"order.created", 1}}, .handler = handler(handle)}});
    worker.drain();
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 4);
  MockKafka kafka;
  kafka.create_topic(std::string(OrderProjected::topic), 1);
  Publisher publisher(pool, {.schema = db.schema(), .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}}});
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") < 4 &&
         std::chrono::steady_clock::now() < deadline)
    publisher.drain();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == 4);
  CHECK(calls() == before);
}
