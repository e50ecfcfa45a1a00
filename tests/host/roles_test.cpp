// Least-privilege roles (core/include/boxcar/core/roles.hpp, docs/security.md section 2):
// every role is refused, with SQLSTATE 42501, what it must not run; only the worker (and
// the migrator) inserts into the outbox; and the whole pipeline runs with one LOGIN user
// per role, migrated and granted by the migrator.
//
// Roles are cluster-wide and tests run in parallel in one cluster: each test derives its
// role prefix from its fresh schema and drops its roles at the end.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/roles.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/ops/dead_records.hpp"
#include "boxcar/ops/retention.hpp"
#include "boxcar/ops/status.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/lambda_handler.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "boxcar/testing/roles.hpp"
#include "child_process.hpp"
#include "exposition.hpp"
#include "order_events.hpp"
#include "test_database.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

// A migrated schema, its six group roles (apply_roles, as the superuser that migrated)
// and one LOGIN user per role, all dropped again at the end.
class RolesFixture {
 public:
  RolesFixture() : options_{.schema = db.schema(), .role_prefix = db.schema() + "_"}, names(role_names(options_)) {
    apply_roles(db.url(), options_);
    const auto server = db.query(
        "SELECT host(inet_server_addr()) AS host, inet_server_port() AS port, "
        "current_database() AS dbname")[0];
    server_ = "host=" + server["host"].as<std::string>() + " port=" + server["port"].as<std::string>() +
              " dbname=" + server["dbname"].as<std::string>();
    for (const auto& role : groups())
      db.execute("CREATE ROLE " + quote_identifier(login(role)) + " LOGIN IN ROLE " + quote_identifier(role));
  }
  ~RolesFixture() {
    try {
      for (const auto& role : groups()) db.execute("DROP ROLE " + quote_identifier(login(role)));
      drop_roles(db.url(), options_);
    } catch (const std::exception& e) {
      WARN("dropping the test roles failed: " << e.what());
    }
  }
  RolesFixture(const RolesFixture&) = delete;
  RolesFixture& operator=(const RolesFixture&) = delete;

  std::vector<std::string> groups() const {
    return {names.migrator, names.ingress, names.worker, names.publisher, names.operator_};
  }
  static std::string login(const std::string& role) { return role + "_login"; }
  // A connection string for the LOGIN user that holds only `role`.
  std::string url_for(const std::string& role) const { return server_ + " user=" + login(role); }
  std::shared_ptr<ConnectionPool> pool_for(const std::string& role, std::size_t size = 4) const {
    return ConnectionPool::create({.url = url_for(role), .size = size});
  }

  // The SQLSTATE `sql` fails with as the LOGIN user of `role` ("" when it succeeds); its
  // transaction is always rolled back.
  std::string sqlstate_as(const std::string& role, const std::string& sql) const {
    pqxx::connection connection(url_for(role));
    pqxx::work tx(connection);
    try {
      tx.exec(db.qualified(sql));
    } catch (const pqxx::insufficient_privilege&) {
      // libpqxx 6.4 throws exactly this class for SQLSTATE 42501, but leaves sqlstate() empty.
      return "42501";
    } catch (const pqxx::sql_error& e) {
      return e.sqlstate().empty() ? std::string("an error without SQLSTATE: ") + e.what() : e.sqlstate();
    }
    return "";
  }

  TestDatabase db;

 private:
  RolesOptions options_;

 public:
  const RoleNames names;

 private:
  std::string server_;
};

const std::string kInsertReceipt = R"(
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, metadata, fingerprint)
VALUES ('tenant', 't1', 'planted', 'orders.v1', 'planted-1', 'thing.happened', 1, '{}', '{}', repeat('0', 64)))";

const std::string kInsertEvent = R"(
INSERT INTO {schema}.outbox_events
    (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, payload)
VALUES ({schema}.outbox_event_id_floor(now()), 'order.projected', 1, 'orders.projected', 'k', 'tenant', 't1', 'forged'))";

struct Refusal {
  std::string why;
  std::string sql;
};

// Rows for the statements to find: one receipt and one event, written by the superuser.
void seed_rows(RolesFixture& f) {
  f.db.execute(kInsertReceipt);
  f.db.execute(kInsertEvent);
}

}  // namespace

TEST_CASE("each role is refused with SQLSTATE 42501 every statement it must not run") {
  RolesFixture f;
  seed_rows(f);
  const std::vector<Refusal> anyone = {
      {"create a table in the schema", "CREATE TABLE {schema}.planted (a int)"},
      {"plant a function in the schema", "CREATE FUNCTION {schema}.now() RETURNS int LANGUAGE sql AS 'SELECT 1'"},
      {"alter a Boxcar table", "ALTER TABLE {schema}.inbox_receipts ADD COLUMN planted int"},
      {"drop a Boxcar table", "DROP TABLE {schema}.outbox_events"},
      {"truncate the inbox", "TRUNCATE {schema}.inbox_receipts"},
      {"truncate the outbox", "TRUNCATE {schema}.outbox_events"},
      {"write the migrations table", "DELETE FROM {schema}.schema_migrations"},
      {"add a backlog snapshot section", "INSERT INTO {schema}.backlog_snapshot (section) VALUES ('planted')"},
      {"delete the backlog snapshot", "DELETE FROM {schema}.backlog_snapshot"},
      {"rename a backlog snapshot section", "UPDATE {schema}.backlog_snapshot SET section = 'outbox'"},
  };
  const std::vector<std::pair<std::string, std::vector<Refusal>>> table = {
      {f.names.ingress,
       {{"update a receipt", "UPDATE {schema}.inbox_receipts SET status = 'COMPLETED'"},
        {"rewrite a receipt's payload", "UPDATE {schema}.inbox_receipts SET payload = '{}'"},
        {"delete a receipt", "DELETE FROM {schema}.inbox_receipts"},
        {"insert a receipt already COMPLETED",
         "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
         "schema_version, payload, metadata, fingerprint, status) VALUES ('tenant', 't1', 's', 'orders.v1', 'm', "
         "'e', 1, '{}', '{}', repeat('0', 64), 'COMPLETED')"},
        {"read another tenant's payload", "SELECT payload FROM {schema}.inbox_receipts"},
        {"read another tenant's metadata", "SELECT metadata FROM {schema}.inbox_receipts"},
        {"read another tenant's errors", "SELECT last_error FROM {schema}.inbox_receipts"},
        {"read whole receipts", "SELECT * FROM {schema}.inbox_receipts"},
        {"read the outbox", "SELECT count(*) FROM {schema}.outbox_events"},
        {"insert into the outbox", kInsertEvent},
        {"read the DEAD views", "SELECT count(*) FROM {schema}.inbox_dead_records"},
        {"read the outbox's key order", "SELECT count(*) FROM {schema}.outbox_ordering_keys"}}},
      {f.names.worker,
       {{"delete a receipt", "DELETE FROM {schema}.inbox_receipts"},
        {"rewrite a receipt's payload", "UPDATE {schema}.inbox_receipts SET payload = '{}'"},
        {"rewrite a receipt's identity", "UPDATE {schema}.inbox_receipts SET consumer = 'other.v1'"},
        {"insert a receipt", kInsertReceipt},
        {"read the outbox's content", "SELECT topic, payload FROM {schema}.outbox_events"},
        {"update an event", "UPDATE {schema}.outbox_events SET status = 'PUBLISHED'"},
        {"delete an event", "DELETE FROM {schema}.outbox_events"},
        {"read the DEAD views", "SELECT count(*) FROM {schema}.outbox_dead_records"},
        {"drop a key's order", "DELETE FROM {schema}.outbox_ordering_keys"},
        {"freeze a key's order", "UPDATE {schema}.outbox_ordering_keys SET unfinished = unfinished + 1"},
        {"forge a key's order",
         "INSERT INTO {schema}.outbox_ordering_keys (topic, tenant_scope, tenant_id, message_key, unfinished, "
         "next_seq) VALUES ('orders', 'tenant', 't2', 'k', 1, 2)"}}},
      {f.names.publisher,
       {{"read the inbox", "SELECT count(*) FROM {schema}.inbox_receipts"},
        {"insert a receipt", kInsertReceipt},
        {"insert into the outbox", kInsertEvent},
        {"re-route an event", "UPDATE {schema}.outbox_events SET topic = 'elsewhere'"},
        {"rewrite an event's payload", "UPDATE {schema}.outbox_events SET payload = 'forged'"},
        {"change an event's tenant", "UPDATE {schema}.outbox_events SET tenant_id = 't2'"},
        {"delete an event", "DELETE FROM {schema}.outbox_events"},
        {"forge a key's order",
         "INSERT INTO {schema}.outbox_ordering_keys (topic, tenant_scope, tenant_id, message_key, unfinished, "
         "next_seq) VALUES ('orders', 'tenant', 't2', 'k', 1, 2)"},
        {"release a key's order", "UPDATE {schema}.outbox_ordering_keys SET unfinished = 0"},
        {"drop a key's order", "DELETE FROM {schema}.outbox_ordering_keys"}}},
      {f.names.operator_,
       {{"insert a receipt", kInsertReceipt},
        {"insert into the outbox", kInsertEvent},
        {"rewrite a receipt's payload", "UPDATE {schema}.inbox_receipts SET payload = '{}'"},
        {"claim a receipt", "UPDATE {schema}.inbox_receipts SET claim_token = gen_random_uuid()"},
        {"re-route an event", "UPDATE {schema}.outbox_events SET topic = 'elsewhere'"},
        {"mark an event published", "UPDATE {schema}.outbox_events SET published_at = now()"},
        {"overwrite the fleet's backlog figures", "UPDATE {schema}.backlog_snapshot SET figures = '{}'"},
        {"forge a key's order",
         "INSERT INTO {schema}.outbox_ordering_keys (topic, tenant_scope, tenant_id, message_key, unfinished, "
         "next_seq) VALUES ('orders', 'tenant', 't2', 'k', 1, 2)"},
        {"drop a key's order", "DELETE FROM {schema}.outbox_ordering_keys"}}},
  };
  for (const auto& [role, refusals] : table) {
    auto all = refusals;
    all.insert(all.end(), anyone.begin(), anyone.end());
    for (const auto& refusal : all) {
      INFO(role << " must not " << refusal.why << ": " << refusal.sql);
      CHECK(f.sqlstate_as(role, refusal.sql) == "42501");
    }
  }
  // The check can fail: the owner runs the same statements.
  CHECK(f.sqlstate_as(f.names.migrator, "CREATE TABLE {schema}.planted (a int)").empty());
  CHECK(f.sqlstate_as(f.names.migrator, "ALTER TABLE {schema}.inbox_receipts ADD COLUMN planted int").empty());
  CHECK(f.sqlstate_as(f.names.migrator, "UPDATE {schema}.inbox_receipts SET payload = '{}'").empty());
}

TEST_CASE("only the worker role and the migrator can insert into the outbox") {
  RolesFixture f;
  for (const auto& role : {f.names.ingress, f.names.publisher, f.names.operator_}) {
    INFO(role);
    CHECK(f.sqlstate_as(role, kInsertEvent) == "42501");
  }
  CHECK(f.sqlstate_as(f.names.worker, kInsertEvent + " RETURNING id").empty());
  CHECK(f.sqlstate_as(f.names.migrator, kInsertEvent).empty());
  CHECK(f.db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 0);  // every attempt rolled back
}

TEST_CASE("applying the roles twice changes nothing, and a missing role is named when it may not be created") {
  RolesFixture f;
  const auto grants = [&] {
    return f.db.scalar("SELECT count(*) FROM information_schema.column_privileges WHERE table_schema = '" +
                       f.db.schema() + "'");
  };
  const auto before = grants();
  CHECK(before > 0);
  const auto again = apply_roles(f.db.url(), {.schema = f.db.schema(), .role_prefix = f.db.schema() + "_"});
  CHECK(again.created.empty());
  CHECK(grants() == before);

  // The migrator's LOGIN user may not CREATE ROLE: a new prefix's roles are missing.
  try {
    apply_roles(f.url_for(f.names.migrator), {.schema = f.db.schema(), .role_prefix = f.db.schema() + "_x_"});
    FAIL("apply_roles created roles without CREATEROLE");
  } catch (const RoleMissingError& e) {
    CHECK(e.code() == "ROLE_MISSING");
    CHECK(e.role() == f.db.schema() + "_x_migrator");
  }
  // With the roles present, the migrator's LOGIN user re-applies the grants itself.
  CHECK(apply_roles(f.url_for(f.names.migrator), {.schema = f.db.schema(), .role_prefix = f.db.schema() + "_"})
            .created.empty());
  CHECK(grants() == before);
  CHECK_THROWS_AS(role_names({.schema = "s", .role_prefix = "Bad-Prefix"}), ConfigError);
}

TEST_CASE("the full pipeline runs with one LOGIN user per role: accept, work and emit, publish, operate") {
  RolesFixture f;
  MockKafka kafka;
  kafka.create_topic(std::string(OrderProjected::topic), 2);
  const std::string consumer = "orders.projection.v1";
  // The application's own table, created by the migrator, and the worker's grant on it
  // (docs/operations.md, "Roles").
  f.db.execute("CREATE TABLE {schema}.order_projection (tenant_id text NOT NULL, order_id text NOT NULL)");
  f.db.execute("ALTER TABLE {schema}.order_projection OWNER TO " + quote_identifier(f.names.migrator));
  f.db.execute("GRANT INSERT ON {schema}.order_projection TO " + quote_identifier(f.names.worker));

  auto ingress_pool = f.pool_for(f.names.ingress);
  auto worker_pool = f.pool_for(f.names.worker, 8);
  auto publisher_pool = f.pool_for(f.names.publisher);
  auto operator_pool = f.pool_for(f.names.operator_);

  // ingress: accept (and a redelivery, which looks the identity up), accept_many.
  Inbox inbox(ingress_pool, {.schema = f.db.schema(), .consumers = {consumer}, .notify = false});
  constexpr int kOrders = 5;
  for (int i = 1; i <= kOrders; ++i) {
    const AcceptRequest request{.scope = Scope::tenant("t1"),
                                .source = "orders-service",
                                .consumer = consumer,
                                .message_id = "evt-" + std::to_string(i),
                                .event_type = "order.created",
                                .schema_version = 1,
                                .payload = {{"orderId", "o-" + std::to_string(i)}}};
    CHECK(inbox.accept(request).kind == Receipt::Kind::Accepted);
    CHECK(inbox.accept(request).kind == Receipt::Kind::Duplicate);
  }
  {
    // accept_many: its one statement inserts and reads the stored rows back (duplicates and
    // a conflict here, so the counts below stay those of the accepted orders).
    std::vector<AcceptRequest> batch;
    for (const int i : {1, 2, 3})
      batch.push_back({.scope = Scope::tenant("t1"),
                       .source = "orders-service",
                       .consumer = consumer,
                       .message_id = "evt-" + std::to_string(i),
                       .event_type = "order.created",
                       .schema_version = 1,
                       .payload = {{"orderId", "o-" + std::to_string(i == 3 ? 99 : i)}}});
    const auto results = inbox.accept_many(batch);
    CHECK(results[0].receipt().kind == Receipt::Kind::Duplicate);
    CHECK(results[1].receipt().kind == Receipt::Kind::Duplicate);
    CHECK(results[2].error_code() == "IDENTITY_CONFLICT");
  }
  inbox.accept({.scope = Scope::tenant("t1"),
                .source = "orders-service",
                .consumer = consumer,
                .message_id = "evt-poison",
                .event_type = "order.created",
                .schema_version = 1,
                .payload = {{"orderId", "poison"}}});

  // worker: one business row and one event per order, in the handler's transaction; the
  // poison message goes DEAD.
  OutboxEmitter outbox(worker_pool, {.schema = f.db.schema(), .notify = false});
  const std::string projection = f.db.qualified("{schema}.order_projection");
  Worker worker(worker_pool, {.schema = f.db.schema(), .consumers = {consumer}},
                {{.consumer = consumer,
                  .supports = {{"order.created", 1}},
                  .handler = handler([&](const nlohmann::json& payload, HandlerContext& context) {
                    const std::string order_id = payload.at("orderId");
                    if (order_id == "poison") throw InboxPermanentError("not an order");
                    context.tx.exec("INSERT INTO " + projection + " (tenant_id, order_id) VALUES ($1, $2)",
                                    context.scope.id, order_id);
                    // An explicit key: the event takes part in its key's order, whose
                    // table only the key-order triggers write (as its owner).
                    outbox.emit(context.tx, OrderProjected{order_id},
                                {.scope = context.scope, .causation_id = context.message_id, .key = order_id});
                  })}});
  CHECK(worker.drain() == kOrders + 1);

  // publisher: the events out to Kafka.
  Publisher publisher(
      publisher_pool,
      {.schema = f.db.schema(), .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}}, .delivery_timeout = 5s});
  CHECK(publisher.drain() == kOrders);
  CHECK(kafka.read_all(std::string(OrderProjected::topic), kOrders, 20s).size() == kOrders);

  // Each process's backlog collector reads what its role may read, and fails on nothing.
  for (const auto& pool : {ingress_pool, worker_pool, publisher_pool, operator_pool}) {
    auto metrics = std::make_shared<Metrics>();
    BacklogCollector collector(pool, metrics, {.schema = f.db.schema(), .declared_consumers = {consumer}});
    CHECK_NOTHROW(collector.collect_once());
  }
  {
    auto metrics = std::make_shared<Metrics>();
    BacklogCollector(publisher_pool, metrics, {.schema = f.db.schema()}).collect_once();
    const Exposition scraped(metrics->serialize());
    CHECK(scraped.value("boxcar_outbox_events", {{"status", "PENDING"}}) == 0.0);
    // The publisher cannot read the inbox, and never computes its figures, but it exports
    // those the ingress's collector stored for the fleet (backlog_snapshot).
    CHECK(scraped.value("boxcar_inbox_receipts", {{"consumer", consumer}, {"status", "DEAD"}}) == 1.0);
    CHECK(scraped.value("boxcar_backlog_snapshot_computed_total", {{"section", "inbox"}}) == 0.0);
  }

  // operator: status, the DEAD record, its discard, and a purge.
  const StatusReport report = status(*operator_pool, f.db.schema(), {consumer});
  REQUIRE(report.inbox.size() == 1);
  CHECK(report.inbox[0].completed == kOrders);
  CHECK(report.inbox[0].dead == 1);
  CHECK(report.outbox.published == kOrders);
  const auto dead = dead_list(*operator_pool, f.db.schema(), RecordKind::Inbox, {.all = true});
  REQUIRE(dead.size() == 1);
  CHECK(dead_show(*operator_pool, f.db.schema(), RecordKind::Inbox, dead[0].id).message_id == "evt-poison");
  // A retry runs it once more (and it goes DEAD again), then it is discarded.
  CHECK(dead_retry(*operator_pool, f.db.schema(), RecordKind::Inbox, {.ids = {dead[0].id}}, "ops").ids.size() == 1);
  CHECK(worker.drain() == 1);
  CHECK(f.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD' AND replay_count = 1") == 1);
  CHECK(dead_discard(*operator_pool, f.db.schema(), RecordKind::Inbox, {.ids = {dead[0].id}}, "ops").ids.size() == 1);
  // An outbox event requeued from DEAD enters its key again (the key-order trigger runs
  // with the operator's grants), and the publisher's mark releases it (with its own).
  f.db.execute(
      "UPDATE {schema}.outbox_events SET status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', published_at = NULL "
      "WHERE id = (SELECT min(id) FROM {schema}.outbox_events)");
  const auto dead_event = f.db.scalar("SELECT min(id) FROM {schema}.outbox_events");
  CHECK(dead_retry(*operator_pool, f.db.schema(), RecordKind::Outbox, {.ids = {dead_event}}, "ops").ids.size() == 1);
  CHECK(publisher.drain() == 1);
  CHECK(f.db.scalar("SELECT count(*) FROM {schema}.outbox_ordering_keys") == 0);
  const PurgeReport purged = purge(*operator_pool, f.db.schema());
  CHECK(purged.inbox_deleted == 0);  // nothing is past the default retention yet

  // The counts at the end, read by the superuser.
  CHECK(f.db.scalar("SELECT count(*) FROM {schema}.order_projection") == kOrders);
  CHECK(f.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == kOrders);
  CHECK(f.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE discarded_by = 'ops'") == 1);
  CHECK(f.db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == kOrders);
}

TEST_CASE(
    "boxcar migrate --roles migrates and grants the roles its --role-prefix names, and a bad prefix changes nothing") {
  TestDatabase db;
  const std::string schema = db.schema() + "_cli";  // not migrated yet
  const std::string prefix = db.schema() + "_cli_";
  const std::vector<std::string> environment = {"BOXCAR_LOG_LEVEL=warn"};
  const auto roles = [&] {
    return db.scalar("SELECT count(*) FROM pg_roles WHERE rolname IN ('" + prefix + "migrator', '" + prefix +
                     "ingress', '" + prefix + "worker', '" + prefix + "publisher', '" + prefix + "operator', '" +
                     prefix + "console')");
  };

  const auto bad = run_process(
      BOXCAR_CLI_PATH, {"migrate", "--database-url", db.url(), "--schema", schema, "--roles", "--role-prefix", "Bad-"},
      environment);
  INFO(bad.output);
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.output, Catch::Matchers::Contains("roles.role_prefix"));
  CHECK(db.scalar("SELECT count(*) FROM pg_namespace WHERE nspname = '" + schema + "'") == 0);

  const auto run = run_process(
      BOXCAR_CLI_PATH, {"migrate", "--database-url", db.url(), "--schema", schema, "--roles", "--role-prefix", prefix},
      environment);
  INFO(run.output);
  CHECK(run.exit_code == 0);
  CHECK(roles() == 6);
  CHECK(db.scalar("SELECT count(*) FROM pg_namespace WHERE nspname = '" + schema +
                  "' AND pg_get_userbyid(nspowner) = '" + prefix + "migrator'") == 1);
  drop_roles(db.url(), {.schema = schema, .role_prefix = prefix});
  db.execute("DROP SCHEMA \"" + schema + "\" CASCADE");
  CHECK(roles() == 0);
}
