// The Runtime in its roles against real PostgreSQL and the mock Kafka cluster, watched
// through its own HTTP endpoints; and three OS processes (ingress, worker, publisher)
// sharing one database.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <optional>
#include <set>
#include <thread>

#include "boxcar/core/migrate.hpp"
#include "boxcar/runtime/runtime.hpp"
#include "exposition.hpp"
#include "http_get.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "boxcar/testing/tcp_proxy.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

int port_of(const std::string& url) {
  const auto colon = url.rfind(':');
  return std::stoi(url.substr(colon + 1, url.find('/', colon) - colon - 1));
}

RuntimeConfig config_for(const TestDatabase& db, const MockKafka& kafka) {
  RuntimeConfig c;
  c.pool.url = db.url();
  c.schema = db.schema();
  c.consumers = {"orders.v1", "audit.v1"};
  c.worker.owned_consumers = {"orders.v1"};  // audit.v1 has no handler here: an orphan no worker owns
  c.worker.max_attempts = 2;
  c.worker.poll_interval = 100ms;
  c.publisher.poll_interval = 100ms;
  c.worker.lease = 5s;
  c.worker.handler_timeout = 2s;
  c.publisher.delivery_timeout = 5s;
  c.publisher.lease = 15s;
  c.publisher.kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}};
  c.http.listen = "127.0.0.1:0";
  c.backlog.interval = 200ms;
  c.probes.readiness_interval = 100ms;
  return c;
}

}  // namespace

TEST_CASE("a runtime running every role exports counters and backlog gauges that follow the messages") {
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders.projected", 2);
  Runtime runtime(config_for(db, kafka));
  const std::string table = db.qualified("{schema}.app_rows");
  create_app_table(db);
  runtime.start(Role::All, {{.consumer = "orders.v1",
                             .supports = {{"order.created", 1}},
                             .handler = handler([&](const nlohmann::json& payload, HandlerContext& c) {
                               const std::string kind = payload.at("kind");
                               if (kind == "fail") throw std::runtime_error("always fails");
                               if (kind == "bad") throw InboxPermanentError("bad order");
                               insert_app_row(table, c);
                               runtime.outbox().emit(c.tx,
                                                     OutboxMessage{.event_type = "order.projected",
                                                                   .schema_version = 1,
                                                                   .topic = "orders.projected",
                                                                   .payload = {{"order", c.message_id}}},
                                                     {.scope = c.scope});
                             })}});
  const int port = runtime.http_port();
  REQUIRE(port > 0);
  CHECK(http_get(port, "/healthz").status == 200);
  CHECK(eventually([&] { return http_get(port, "/readyz").status == 200; }, 10s));

  const auto request = [](const std::string& consumer, const std::string& id, const std::string& kind) {
    return AcceptRequest{.scope = Scope::tenant("t1"),
                         .source = "test",
                         .consumer = consumer,
                         .message_id = id,
                         .event_type = "order.created",
                         .schema_version = 1,
                         .payload = {{"kind", kind}}};
  };
  for (int i = 0; i < 5; ++i) runtime.inbox().accept(request("orders.v1", "ok-" + std::to_string(i), "ok"));
  runtime.inbox().accept(request("orders.v1", "ok-0", "ok"));  // a redelivery
  runtime.inbox().accept(request("orders.v1", "fail-1", "fail"));
  runtime.inbox().accept(request("orders.v1", "bad-1", "bad"));
  runtime.inbox().accept(request("audit.v1", "orphan-1", "ok"));
  runtime.inbox().accept(request("audit.v1", "orphan-2", "ok"));
  CHECK_THROWS_AS(runtime.inbox().accept(request("orders.v1", "ok-1", "different")), InboxConflictError);

  const auto metrics = [&] { return http_get(port, "/metrics").body; };
  // Counters move when each commit returns; the backlog gauges move at the collector's
  // next cycle, which may have read the outbox before the publisher marked the last
  // event. Settled means one scrape shows both.
  std::string text;
  const bool settled = eventually([&] {
    text = metrics();
    return metric_value(text, "boxcar_publisher_events_total",
                        {{"outcome", "delivered"}, {"topic", "orders.projected"}}) == 5 &&
           metric_value(text, "boxcar_inbox_processed_total",
                        {{"consumer", "orders.v1"}, {"event_type", "order.created"}, {"outcome", "dead"}}) == 2 &&
           metric_value(text, "boxcar_inbox_receipts", {{"consumer", "orders.v1"}, {"status", "DEAD"}}) == 2 &&
           metric_value(text, "boxcar_outbox_events", {{"status", "PENDING"}}) == 0;
  });
  INFO(text);
  CHECK(settled);
  CHECK(metric_value(text, "boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "accepted"}}) == 7);
  CHECK(metric_value(text, "boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "duplicate"}}) == 1);
  CHECK(metric_value(text, "boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "conflict"}}) == 1);
  CHECK(metric_value(text, "boxcar_inbox_accept_total", {{"consumer", "audit.v1"}, {"result", "accepted"}}) == 2);
  CHECK(metric_value(text, "boxcar_inbox_processed_total",
                     {{"consumer", "orders.v1"}, {"event_type", "order.created"}, {"outcome", "completed"}}) == 5);
  CHECK(metric_value(text, "boxcar_inbox_processed_total",
                     {{"consumer", "orders.v1"}, {"event_type", "order.created"}, {"outcome", "retried"}}) == 1);
  CHECK(metric_value(text, "boxcar_outbox_emitted_total",
                     {{"event_type", "order.projected"}, {"topic", "orders.projected"}}) == 5);
  CHECK(metric_value(text, "boxcar_inbox_handler_duration_seconds_count", {{"consumer", "orders.v1"}}) == 8);
  CHECK(metric_value(text, "boxcar_inbox_accept_to_complete_seconds_count", {{"consumer", "orders.v1"}}) == 5);
  CHECK(metric_value(text, "boxcar_publisher_emit_to_delivered_seconds_count", {{"topic", "orders.projected"}}) == 5);
  // The orphaned consumer (declared, owned by no worker) shows its backlog.
  CHECK(metric_value(text, "boxcar_inbox_receipts", {{"consumer", "audit.v1"}, {"status", "PENDING"}}) == 2);
  CHECK(metric_value(text, "boxcar_inbox_oldest_due_age_seconds", {{"consumer", "audit.v1"}}) >= 0);
  CHECK(metric_value(text, "boxcar_outbox_events", {{"status", "PENDING"}}) == 0);
  runtime.stop();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 5);
}

TEST_CASE("readiness fails while the schema is behind this build's migrations, naming the migrations check") {
  TestDatabase db;
  MockKafka kafka;
  db.query(
      "DELETE FROM {schema}.schema_migrations WHERE version = (SELECT max(version) FROM {schema}.schema_migrations)");
  Runtime runtime(config_for(db, kafka));
  runtime.start(Role::Ingress);
  std::string detail;
  // Checked in the background: the verdict arrives after the first check.
  CHECK(eventually([&] { return !runtime.ready(&detail) && detail.find("migrations at version") != std::string::npos; },
                   10s));
  const auto response = http_get(runtime.http_port(), "/readyz");
  CHECK(response.status == 503);
  const auto body = nlohmann::json::parse(response.body);
  CHECK(body["ready"] == false);
  CHECK(body["checks"] == nlohmann::json({{"database", true}, {"migrations", false}}));
  CHECK(http_get(runtime.http_port(), "/healthz").status == 200);
}

TEST_CASE("readiness passes on a schema a newer build migrated compatibly and fails when it is incompatible") {
  // A rolling deploy: the new release migrated first; the old replicas must stay ready
  // when the new migrations say they are compatible with them, and only then.
  TestDatabase db;
  MockKafka kafka;
  const int build = latest_migration_version();
  db.query("INSERT INTO {schema}.schema_migrations (version, name, checksum, compatible_with) VALUES (" +
           std::to_string(build + 1) + ", 'newer.sql', repeat('a', 64), " + std::to_string(build) + ")");
  Runtime runtime(config_for(db, kafka));
  runtime.start(Role::Ingress);
  std::string detail;
  // Checked in the background: each verdict arrives with the next check.
  REQUIRE(eventually([&] { return runtime.ready(&detail); }, 10s));
  CHECK(http_get(runtime.http_port(), "/readyz").status == 200);

  db.query("UPDATE {schema}.schema_migrations SET compatible_with = version WHERE version = " +
           std::to_string(build + 1));
  CHECK(eventually([&] { return !runtime.ready(&detail) && detail.find("not compatible") != std::string::npos; }, 15s));
  const auto response = http_get(runtime.http_port(), "/readyz");
  CHECK(response.status == 503);
  CHECK(nlohmann::json::parse(response.body)["checks"]["migrations"] == false);
}

TEST_CASE("readiness fails on a schema that was never migrated") {
  TestDatabase db;
  MockKafka kafka;
  auto config = config_for(db, kafka);
  config.schema = db.schema() + "_empty";  // no such schema: nothing applied
  Runtime runtime(config);
  runtime.start(Role::Ingress);
  CHECK(eventually([&] { return runtime.readiness().checks.size() == 2; }, 10s));
  const auto response = http_get(runtime.http_port(), "/readyz");
  CHECK(response.status == 503);
  const auto body = nlohmann::json::parse(response.body);
  CHECK(body["checks"]["database"] == true);
  CHECK(body["checks"]["migrations"] == false);
  CHECK(body["detail"].get<std::string>().find("migrations at version 0") != std::string::npos);
}

TEST_CASE("readiness lists database, migrations and kafka for a publisher, and names the database when it is down") {
  TestDatabase db;
  MockKafka kafka;
  std::optional<TcpProxy> proxy(std::in_place, "127.0.0.1", port_of(db.url()));
  auto config = config_for(db, kafka);
  config.pool.url = proxy->route(db.url());
  Runtime runtime(config);
  runtime.start(Role::Publisher);
  const int port = runtime.http_port();

  CHECK(eventually([&] { return http_get(port, "/readyz").status == 200; }, 10s));
  // ordered_json: the order of the checks is part of the answer.
  const auto ready = nlohmann::ordered_json::parse(http_get(port, "/readyz").body);
  CHECK(ready["ready"] == true);
  // In this order, and only these: an ingress or worker has no kafka check.
  CHECK(ready["checks"].dump() == R"({"database":true,"migrations":true,"kafka":true})");
  CHECK(ready["detail"] == "");

  proxy.reset();  // the database stops answering: connections refused
  CHECK(eventually([&] { return !runtime.readiness().checks.at(0).second; }, 10s));
  const auto down = http_get(port, "/readyz");
  CHECK(down.status == 503);
  const auto body = nlohmann::ordered_json::parse(down.body);
  CHECK(body["ready"] == false);
  CHECK(body["checks"].dump() == R"({"database":false,"migrations":false,"kafka":true})");
  CHECK(body["detail"].get<std::string>().find("database unreachable") != std::string::npos);
  CHECK(http_get(port, "/healthz").status == 200);

  kafka.set_all_down(true);
  CHECK(eventually([&] { return nlohmann::json::parse(http_get(port, "/readyz").body)["checks"]["kafka"] == false; },
                   20s));
  runtime.stop();
}

TEST_CASE(
    "with brokers down and a batch in flight, 20 concurrent /readyz calls answer from the cache and leave /healthz "
    "answering") {
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders.projected", 2);
  TcpProxy proxy("127.0.0.1", port_of(db.url()));  // counts every connection the runtime opens
  auto config = config_for(db, kafka);
  config.pool.url = proxy.route(db.url());
  // A delivery timeout far longer than the test: the batch stays in flight throughout, and
  // the publishing thread holds the producer's mutex while it awaits the reports.
  config.publisher.delivery_timeout = 15s;
  config.publisher.lease = 25s;
  Runtime runtime(config);
  runtime.start(Role::Publisher);
  const int port = runtime.http_port();
  REQUIRE(eventually([&] { return http_get(port, "/readyz").status == 200; }, 10s));

  kafka.set_all_down(true);
  {
    Tx tx = runtime.pool()->begin();
    for (int i = 0; i < 5; ++i)
      runtime.outbox().emit(
          tx,
          OutboxMessage{
              .event_type = "order.projected", .schema_version = 1, .topic = "orders.projected", .payload = {{"n", i}}},
          {.scope = Scope::global()});
    tx.commit();
  }
  const auto in_flight = [&] {
    return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHING'");
  };
  REQUIRE(eventually([&] { return in_flight() == 5; }, 20s));
  // The background check has seen the brokers go: the cached verdict says so.
  REQUIRE(eventually(
      [&] {
        const auto report = runtime.readiness();
        return report.checks.size() == 3 && !report.checks.at(2).second;
      },
      20s));

  const int connections_before = proxy.connections();
  // This runtime's readiness session: other tests' runtimes use the same database, and
  // their sessions carry the same name; only this one's connections pass the proxy.
  const auto readiness_session = [&] {
    std::string ports;
    for (const int port : proxy.server_side_ports()) ports += (ports.empty() ? "" : ",") + std::to_string(port);
    return db.scalar(
        "SELECT coalesce(max(pid), 0) FROM pg_stat_activity WHERE application_name = 'boxcar-readiness' AND "
        "datname = current_database() AND client_port = ANY ('{" +
        ports + "}'::integer[])");
  };
  const auto session_before = readiness_session();

  using Clock = std::chrono::steady_clock;
  std::atomic<bool> go{false};
  std::atomic<int> sending{0};
  std::atomic<int> answered{0};
  std::vector<int> statuses(20, 0);
  std::vector<std::string> bodies(20);
  std::vector<std::thread> probes;
  for (int i = 0; i < 20; ++i)
    probes.emplace_back([&, i] {
      while (!go) std::this_thread::yield();
      ++sending;
      try {
        const auto response = http_get(port, "/readyz");
        statuses[i] = response.status;
        bodies[i] = response.body;
      } catch (const std::exception& e) {
        bodies[i] = e.what();
      }
      ++answered;
    });
  const auto burst_start = Clock::now();
  go = true;
  while (sending < 20) std::this_thread::yield();
  // /healthz after every /readyz is on its way, and again for as long as any is unanswered.
  int health_calls = 0;
  int health_failures = 0;
  std::string health_error;
  Clock::duration slowest_health{0};
  do {
    const auto start = Clock::now();
    try {
      const auto health = http_get(port, "/healthz");
      if (health.status != 200 || health.body != "ok\n") {
        ++health_failures;
        health_error = health.body;
      }
    } catch (const std::exception& e) {
      ++health_failures;
      health_error = e.what();
    }
    slowest_health = std::max(slowest_health, Clock::now() - start);
    ++health_calls;
  } while (answered < 20);
  for (auto& t : probes) t.join();
  const auto burst = Clock::now() - burst_start;

  const auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };
  // The measured figures go to the report; only the liveness bound below decides.
  WARN("/healthz: " << health_calls << " call(s) while 20 concurrent /readyz were in flight, slowest "
                    << ms(slowest_health) << " ms; the 20 /readyz all answered within " << ms(burst) << " ms");
  INFO("last /healthz failure: " << health_error);
  CHECK(health_failures == 0);
  CHECK(slowest_health < 1s);
  for (int i = 0; i < 20; ++i) {
    INFO("probe " << i << ": " << bodies[i]);
    CHECK(statuses[i] == 503);
    if (statuses[i] != 503) continue;
    const auto body = nlohmann::json::parse(bodies[i]);
    CHECK(body["checks"]["kafka"] == false);
    CHECK(body["checks"]["database"] == true);
    CHECK(body["stale"] == false);
  }
  CHECK(in_flight() == 5);  // the batch was still in flight throughout
  // Answered from the cache: the 20 probes opened no database connection, and the
  // background check still uses the session it had.
  CHECK(proxy.connections() - connections_before == 0);
  CHECK(session_before != 0);
  CHECK(readiness_session() == session_before);
  runtime.stop();
}

TEST_CASE("ingress, worker and publisher run as three processes against one database") {
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders.projected", 2);
  create_app_table(db);
  const std::vector<std::string> environment = {"BOXCAR_DATABASE_URL=" + db.url(),
                                                "BOXCAR_SCHEMA=" + db.schema(),
                                                "BOXCAR_CONSUMERS=orders.v1",
                                                "BOXCAR_HTTP_LISTEN=127.0.0.1:0",
                                                "BOXCAR_WORKER_POLL_INTERVAL_MS=200",
                                                "BOXCAR_PUBLISHER_POLL_INTERVAL_MS=200",
                                                "BOXCAR_KAFKA_BOOTSTRAP_SERVERS=" + kafka.bootstrap_servers(),
                                                "BOXCAR_LOG_LEVEL=warn"};
  const auto spawn = [&](const char* program, std::vector<std::string> args) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (const auto& e : environment) putenv(const_cast<char*>(e.c_str()));
      std::vector<char*> argv{const_cast<char*>(program)};
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(program, argv.data());
      _exit(127);
    }
    return pid;
  };
  const auto wait_exit = [](pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  };

  REQUIRE(wait_exit(spawn(BOXCAR_TEST_APP_PATH, {"ingest", "200"})) == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING'") == 200);

  const pid_t worker = spawn(BOXCAR_TEST_APP_PATH, {"worker"});
  const pid_t publisher = spawn(BOXCAR_CLI_PATH, {"publisher"});  // the generic binary: no application code
  CHECK(eventually(
      [&] { return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == 200; }, 60s));
  ::kill(worker, SIGTERM);
  ::kill(publisher, SIGTERM);
  CHECK(wait_exit(worker) == 0);
  CHECK(wait_exit(publisher) == 0);

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 200);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == 200);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 200);
  std::set<std::string> ids;
  for (const auto& r : kafka.read_all("orders.projected", 200, 30s)) ids.insert(r.headers.at("event_id"));
  CHECK(ids.size() == 200);
}

TEST_CASE(
    "worker.enabled keeps its default: an ingress-only module builds no worker without setting it, and a worker "
    "deployment of the same configuration claims without setting it") {
  // docs/runtime.md, "Ingress-only and worker deployments": the role chooses whether a
  // process claims; worker.enabled = false only switches off a worker a role would run.
  TestDatabase db;
  create_app_table(db);
  const auto config =
      load_config({.environment = std::vector<std::string>{
                       "BOXCAR_DATABASE_URL=" + db.url(), "BOXCAR_SCHEMA=" + db.schema(), "BOXCAR_CONSUMERS=orders.v1",
                       "BOXCAR_HTTP_LISTEN=", "BOXCAR_WORKER_POLL_INTERVAL_MS=100"}});
  CHECK(config.worker.enabled);
  {
    // No handler and no worker setting: an enabled worker would refuse to start for lack
    // of a handler of orders.v1 (ConfigError worker.consumers); the ingress role builds none.
    Runtime ingress(config);
    CHECK_NOTHROW(ingress.start(Role::Ingress));
    CHECK(ingress.inbox().accept(message("orders.v1", "m-1")).kind == Receipt::Kind::Accepted);
    ingress.stop();
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING' AND attempts = 0") == 1);

  Runtime worker(config);
  worker.start(Role::Worker, {app_row_writer("orders.v1", db.qualified("{schema}.app_rows"))});
  CHECK(eventually(
      [&] { return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 1; }, 20s));
  worker.stop();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 1);
}

TEST_CASE("outbox.topics loads as a list and is the runtime emitter's declaration") {
  TestDatabase db;
  const auto config = load_config(
      {.environment = std::vector<std::string>{"BOXCAR_DATABASE_URL=" + db.url(), "BOXCAR_SCHEMA=" + db.schema(),
                                               "BOXCAR_OUTBOX_TOPICS=orders.projected, audit"}});
  CHECK(config.outbox_topics == std::set<std::string>{"orders.projected", "audit"});
  Runtime runtime(config);
  CHECK(runtime.outbox().options().topics == std::set<std::string>{"orders.projected", "audit"});
  CHECK(
      load_config({.environment = std::vector<std::string>{"BOXCAR_DATABASE_URL=" + db.url()}}).outbox_topics.empty());
}
