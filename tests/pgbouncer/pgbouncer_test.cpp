// Boxcar behind Debian's pgbouncer (1.18), started by the test on loopback: the whole
// pipeline (accept, handle with one row and one event, publish to the mock Kafka cluster)
// in session and transaction pooling, counted in rows and Kafka records; and the startup
// refusals of the combinations transaction pooling breaks (docs/operations.md, "PgBouncer").
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "boxcar/core/detail/async_notifier.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/runtime/runtime.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "boxcar/testing/pgbouncer.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kMessages = 5000;
constexpr std::size_t kAcceptedOneByOne = 100;  // the single-accept statements too
constexpr std::size_t kBatch = 500;

// The configuration an operator writes for `pool_mode`: through PgBouncer, and for
// transaction pooling the direct session URL; everything else as loaded from BOXCAR_*.
RuntimeConfig config_through(const std::string& pool_mode, const PgBouncer& bouncer, const TestDatabase& db,
                             const MockKafka& kafka) {
  std::vector<std::string> environment = {
      "BOXCAR_DATABASE_URL=" + bouncer.route(db.url()),
      "BOXCAR_DATABASE_POOLER=" + pool_mode,
      "BOXCAR_SCHEMA=" + db.schema(),
      "BOXCAR_CONSUMERS=orders.v1",
      "BOXCAR_WORKER_CONCURRENCY=4",
      "BOXCAR_WORKER_BATCH_SIZE=20",
      // No poll within the test's time: the work must be woken by NOTIFY through the
      // listeners, which transaction pooling would silently break without session_url.
      "BOXCAR_WORKER_POLL_INTERVAL_MS=300000",
      "BOXCAR_PUBLISHER_POLL_INTERVAL_MS=300000",
      "BOXCAR_KAFKA_BOOTSTRAP_SERVERS=" + kafka.bootstrap_servers(),
      "BOXCAR_HTTP_LISTEN=",
  };
  if (pool_mode == "transaction") environment.push_back("BOXCAR_DATABASE_SESSION_URL=" + db.url());
  return load_config({.environment = environment});
}

// Accepts, handles and publishes kMessages through PgBouncer in `pool_mode`, then counts:
// every message once in each table and once in Kafka.
void run_pipeline(const std::string& pool_mode) {
  REQUIRE(PgBouncer::available());  // scripts/setup installs Debian's pgbouncer
  TestDatabase db;
  PgBouncer bouncer(db.url(), {.pool_mode = pool_mode});
  MockKafka kafka(1);
  kafka.create_topic("orders.projected", 4);
  create_app_table(db);
  const std::string table = db.qualified("{schema}.app_rows");

  RuntimeConfig config = config_through(pool_mode, bouncer, db, kafka);
  CHECK(config.pool.prepared_statements == (pool_mode != "transaction"));
  if (pool_mode == "session") {
    // The migration lock is a session advisory lock: a whole session behind PgBouncer.
    CHECK(migrate(config.pool.url, {.schema = db.schema()}).applied.empty());
  }
  Runtime runtime(std::move(config));
  runtime.start(Role::All, {{.consumer = "orders.v1",
                             .supports = {{"thing.happened", 1}},
                             .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                               insert_app_row(table, c);
                               runtime.outbox().emit(c.tx,
                                                     OutboxMessage{.event_type = "order.projected",
                                                                   .schema_version = 1,
                                                                   .topic = "orders.projected",
                                                                   .payload = {{"order", c.message_id}}},
                                                     {.scope = c.scope, .causation_id = c.message_id});
                             })}});

  std::vector<AcceptRequest> requests;
  for (int i = 0; i < kMessages; ++i) requests.push_back(message("orders.v1", "m-" + std::to_string(i)));
  for (std::size_t i = 0; i < kAcceptedOneByOne; ++i)
    REQUIRE(runtime.inbox().accept(requests[i]).kind == Receipt::Kind::Accepted);
  std::size_t accepted = kAcceptedOneByOne;
  for (std::size_t first = kAcceptedOneByOne; first < requests.size(); first += kBatch) {
    const auto batch = std::span(requests).subspan(first, std::min(kBatch, requests.size() - first));
    for (const auto& result : runtime.inbox().accept_many(batch))
      if (result.receipt().kind == Receipt::Kind::Accepted) ++accepted;
  }
  CHECK(accepted == kMessages);
  // A redelivery through the pooler is recognised (the lookup statement).
  CHECK(runtime.inbox().accept(requests[0]).kind == Receipt::Kind::Duplicate);

  const bool published = eventually(
      [&] { return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == kMessages; },
      60s);
  runtime.stop();
  INFO(bouncer.output().substr(bouncer.output().size() > 4000 ? bouncer.output().size() - 4000 : 0));
  REQUIRE(published);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == kMessages);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == kMessages);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == kMessages);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == kMessages);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == kMessages);

  const auto records = kafka.read_all("orders.projected", kMessages, 30s);
  std::set<std::pair<int, std::int64_t>> positions;
  std::set<std::string> event_ids;
  std::set<std::string> causes;
  for (const auto& record : records) {
    positions.emplace(record.partition, record.offset);  // 2.0.2 consumers may redeliver
    event_ids.insert(record.headers.at("event_id"));
    causes.insert(record.headers.at("causation_id"));
  }
  CHECK(positions.size() == kMessages);  // nothing produced twice
  CHECK(event_ids.size() == kMessages);
  CHECK(causes.size() == kMessages);  // every accepted message, once
}

}  // namespace

TEST_CASE("through PgBouncer in session pooling 5000 messages are accepted, handled and published exactly once each") {
  run_pipeline("session");
}

TEST_CASE(
    "through PgBouncer in transaction pooling 5000 messages are accepted, handled and published exactly once each") {
  run_pipeline("transaction");
}

TEST_CASE("transaction pooling without a direct session URL or with prepared statements is refused at startup") {
  const std::vector<std::string> base = {"BOXCAR_DATABASE_URL=postgresql://app@pgbouncer:6432/orders",
                                         "BOXCAR_DATABASE_POOLER=transaction"};
  const auto refusal = [&](std::vector<std::string> extra) -> std::string {
    std::vector<std::string> environment = base;
    environment.insert(environment.end(), extra.begin(), extra.end());
    try {
      load_config({.environment = environment});
    } catch (const ConfigError& e) {
      CHECK(e.code() == "CONFIG_INVALID");
      return e.key();
    }
    return "(accepted)";
  };
  CHECK(refusal({}) == "database.session_url");
  CHECK(refusal({"BOXCAR_DATABASE_SESSION_URL=postgresql://app@pgbouncer:6432/orders"}) == "database.session_url");
  CHECK(refusal({"BOXCAR_DATABASE_SESSION_URL=postgresql://app@db:5432/orders",
                 "BOXCAR_DATABASE_PREPARED_STATEMENTS=true"}) == "database.prepared_statements");
  CHECK(refusal({"BOXCAR_DATABASE_POOLER=pgbouncer"}) == "database.pooler");
  CHECK(refusal({"BOXCAR_DATABASE_SESSION_URL=postgresql://app@db:5432/orders"}) == "(accepted)");

  // A configuration built in code is checked by the Runtime itself.
  RuntimeConfig in_code;
  in_code.pool.url = "postgresql://app@pgbouncer:6432/orders";
  in_code.pooler = "transaction";
  CHECK_THROWS_MATCHES(Runtime{in_code}, ConfigError, Catch::Predicate<ConfigError>([](const ConfigError& e) {
                         return e.key() == "database.session_url";
                       }));
}

TEST_CASE("the defaults keep prepared statements, and false or auto with transaction pooling turns them off") {
  const std::string url = "BOXCAR_DATABASE_URL=postgresql://app@db:5432/orders";
  CHECK(load_config({.environment = std::vector<std::string>{url}}).pool.prepared_statements);
  CHECK_FALSE(load_config({.environment = std::vector<std::string>{url, "BOXCAR_DATABASE_PREPARED_STATEMENTS=false"}})
                  .pool.prepared_statements);
  const auto through_transaction_pooler = load_config(
      {.environment = std::vector<std::string>{"BOXCAR_DATABASE_URL=postgresql://app@pgbouncer:6432/orders",
                                               "BOXCAR_DATABASE_POOLER=transaction",
                                               "BOXCAR_DATABASE_SESSION_URL=postgresql://app@db:5432/orders"}});
  CHECK_FALSE(through_transaction_pooler.pool.prepared_statements);
  CHECK(through_transaction_pooler.pool.session_url == "postgresql://app@db:5432/orders");
}

TEST_CASE("Boxcar's own statements leave no session setting on a transaction pooler's server connection") {
  REQUIRE(PgBouncer::available());
  TestDatabase db;
  // One server connection: every transaction of Boxcar's and the next client's share it.
  PgBouncer bouncer(db.url(), {.pool_mode = "transaction", .pool_size = 1});
  const std::string url = bouncer.route(db.url());
  pqxx::connection next(url);
  const auto setting = [&](const char* name) {
    pqxx::nontransaction statement(next);
    return statement.exec(std::string("SHOW ") + name)[0][0].as<std::string>();
  };
  {
    // The NOTIFY sender turns off synchronous commit for its wake-ups.
    detail::AsyncNotifier notifier(url, "boxcar_pgbouncer_test");
    notifier.notify("orders.v1");
    notifier.flush();
  }
  CHECK(setting("synchronous_commit") == "on");
  {
    // An ingress borrows only LoanUse::BoxcarOnly connections: no pool session reset
    // (RESET ALL) would hide a setting left behind.
    // The readiness check bounds its statements with timeouts.
    RuntimeConfig config;
    config.pool.url = url;
    config.pool.session_url = db.url();
    config.pooler = "transaction";
    config.schema = db.schema();
    config.consumers = {"orders.v1"};
    config.probes.readiness_interval = 50ms;
    config.http.listen = "";  // no port to share with parallel tests
    Runtime runtime(std::move(config));
    runtime.start(Role::Ingress);
    CHECK(eventually([&] { return runtime.ready(); }, 10s));
    CHECK(runtime.inbox().accept(message("orders.v1", "m-1")).kind == Receipt::Kind::Accepted);
  }
  CHECK(setting("synchronous_commit") == "on");
  CHECK(setting("statement_timeout") == "0");
  CHECK(setting("lock_timeout") == "0");
}
