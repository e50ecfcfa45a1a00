// The operator console's API (docs/console.md) against a real pipeline: what it reports,
// who may act and how an action is confirmed and recorded, keyset pages and their plan,
// the console role's reach, the admin token's sources, and the xmin holder in status.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "boxcar/core/error.hpp"
#include "boxcar/core/roles.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/ops/console.hpp"
#include "boxcar/ops/database_health.hpp"
#include "boxcar/ops/detail/named_statements.hpp"
#include "boxcar/ops/operator.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/runtime/config.hpp"
#include "boxcar/testing/roles.hpp"
#include "console_pipeline.hpp"
#include "http_get.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
using json = nlohmann::json;

namespace {

using Pipeline = ConsolePipeline;

json get(int port, const std::string& path, const std::string& token = "") {
  std::vector<std::string> headers;
  if (!token.empty()) headers.push_back("Authorization: Bearer " + token);
  const auto response = http_send(port, "GET", path, headers, "");
  INFO(path << " -> " << response.status << " " << response.body);
  REQUIRE(response.status == 200);
  return json::parse(response.body);
}

struct Post {
  std::string token = Pipeline::kAdminToken;
  bool csrf = true;
  std::string origin = "same";  // "same", "" (none) or another origin
};

HttpResponse post(int port, const std::string& path, const json& body, const Post& how = {}) {
  const std::string host = "127.0.0.1:" + std::to_string(port);
  std::vector<std::string> headers = {"Host: " + host, "Content-Type: application/json"};
  if (!how.token.empty()) headers.push_back("Authorization: Bearer " + how.token);
  if (how.csrf) headers.push_back("X-CSRF-Token: " + get(port, "/api/v1/session")["csrf_token"].get<std::string>());
  if (how.origin == "same")
    headers.push_back("Origin: http://" + host);
  else if (!how.origin.empty())
    headers.push_back("Origin: " + how.origin);
  return http_send(port, "POST", path, headers, body.dump());
}

std::string error_code(const HttpResponse& response) {
  const auto body = json::parse(response.body, nullptr, false);
  return body.is_object() && body.contains("error") ? body["error"].value("code", "") : "";
}

std::string poison_group(int port) {
  const auto groups = get(port, "/api/v1/dead/groups?kind=inbox")["groups"];
  for (const auto& g : groups)
    if (g["consumers"] == json::array({Pipeline::kOrders})) return g["group"].get<std::string>();
  FAIL("no DEAD group of " << Pipeline::kOrders << ": " << groups.dump());
  return {};
}

const json* consumer_of(const json& overview, const std::string& name) {
  for (const auto& c : overview["inbox"]["consumers"])
    if (c["consumer"] == name) return &c;
  return nullptr;
}

// A session that holds a REPEATABLE READ snapshot open, as a forgotten psql would.
struct SnapshotHolder {
  explicit SnapshotHolder(const TestDatabase& db) : connection(db.url()) {
    pqxx::nontransaction(connection).exec("SET application_name = 'forgotten-psql'");
    tx = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(connection);
    tx->exec("SELECT 1");  // a snapshot, and no lock that DDL would wait for
    pid = tx->exec("SELECT pg_backend_pid()")[0][0].as<int>();
  }
  pqxx::connection connection;
  std::unique_ptr<pqxx::transaction<pqxx::repeatable_read>> tx;
  int pid = 0;
};

// A Runtime's configuration for `db` with the console on (port 0: any free one) or off,
// no HTTP listener, one consumer.
RuntimeConfig console_config(const TestDatabase& db, bool console_enabled = true) {
  RuntimeConfig config;
  config.pool.url = db.url();
  config.schema = db.schema();
  config.consumers = {"orders.v1"};
  config.http.listen = "";
  if (console_enabled) config.console = {.enabled = true, .port = 0, .admin_token = Pipeline::kAdminToken};
  return config;
}

}  // namespace

TEST_CASE("the console is off unless console.enabled: no port is bound") {
  CHECK_FALSE(RuntimeConfig{}.console.enabled);
  TestDatabase db;
  Runtime runtime(console_config(db, false));
  runtime.start(Role::Ingress);
  CHECK(runtime.console_port() == 0);
  runtime.stop();
}

TEST_CASE("the overview answers before the backlog figures were ever collected") {
  TestDatabase db;
  Runtime runtime(console_config(db));
  runtime.start(Role::Ingress);
  // A stored section that no collector has computed yet keeps collected_at '-infinity'.
  db.execute("UPDATE {schema}.backlog_snapshot SET collected_at = '-infinity'");
  const auto overview = get(runtime.console_port(), "/api/v1/overview");
  CHECK(overview.contains("outbox"));
  runtime.stop();
}

TEST_CASE("the console's API reports the backlog, the DEAD groups, the blocked keys and the health") {
  Pipeline p;
  SnapshotHolder holder(p.db);
  const int port = p.port();
  REQUIRE(port > 0);

  // The overview carries the fleet's backlog figures: the same numbers as status, once the
  // collector has run after the pipeline settled.
  const auto status_report = status(*p.db.pool(), p.db.schema(), {Pipeline::kOrders, Pipeline::kShipments});
  json overview;
  REQUIRE(eventually(
      [&] {
        overview = get(port, "/api/v1/overview");
        const auto* orders = consumer_of(overview, Pipeline::kOrders);
        const auto* shipments = consumer_of(overview, Pipeline::kShipments);
        return orders && shipments && (*orders)["dead"] == status_report.inbox[0].dead &&
               (*shipments)["waiting"] == status_report.inbox[1].waiting &&
               (*shipments)["dead"] == status_report.inbox[1].dead;
      },
      20s));
  CHECK((*consumer_of(overview, Pipeline::kOrders))["dead"] == Pipeline::kPoisoned);
  CHECK((*consumer_of(overview, Pipeline::kOrders))["declared"] == true);
  CHECK((*consumer_of(overview, Pipeline::kShipments))["waiting"] == 2);
  CHECK((*consumer_of(overview, Pipeline::kOrders))["completed_in_window"] == Pipeline::kGood);
  CHECK(overview["figures"]["inbox"]["known"] == true);
  CHECK(overview["outbox"]["unpublished"] == 0);

  // DEAD groups as `dead list --group` computes them.
  const auto groups = dead_groups(*p.db.pool(), p.db.schema(), RecordKind::Inbox);
  const std::string group = poison_group(port);
  const auto api_groups = get(port, "/api/v1/dead/groups?kind=inbox")["groups"];
  REQUIRE(api_groups.size() == groups.size());
  for (std::size_t i = 0; i < groups.size(); ++i) {
    CHECK(api_groups[i]["group"] == groups[i].group);
    CHECK(api_groups[i]["count"] == groups[i].count);
    CHECK(api_groups[i]["failure"] == groups[i].failure);
  }
  const auto page = get(port, "/api/v1/dead/groups/" + group + "?kind=inbox&limit=50");
  CHECK(page["records"].size() == Pipeline::kPoisoned);
  CHECK(page["next"].is_null());
  CHECK_THAT(page["records"][0]["last_error"].get<std::string>(), Contains("card declined for order"));
  CHECK_FALSE(page["records"][0].contains("payload"));

  const auto keys = get(port, "/api/v1/blocked-keys")["keys"];
  REQUIRE(keys.size() == 1);
  CHECK(keys[0]["key"] == "k1");
  CHECK(keys[0]["scope"] == "tenant:acme");
  CHECK(keys[0]["consumer"] == Pipeline::kShipments);
  CHECK(keys[0]["status"] == "DEAD");
  CHECK(keys[0]["blocked_since"].is_string());

  const auto health = get(port, "/api/v1/health");
  REQUIRE_FALSE(health["xmin_holders"].empty());
  CHECK(health["xmin_holders"][0]["pid"] == holder.pid);
  CHECK(health["xmin_holders"][0]["application_name"] == "forgotten-psql");
  CHECK(health["xmin_holders"][0]["state"] == "idle in transaction");
  CHECK(health["migrations"]["compatible"] == true);
  CHECK(health["migrations"]["applied_version"] == health["migrations"]["build_version"]);
  CHECK(health["notification_queue_usage"].is_number());
  bool receipts_listed = false;
  for (const auto& t : health["tables"]) receipts_listed = receipts_listed || t["table"] == "inbox_receipts";
  CHECK(receipts_listed);

  // The page and its assets, under a strict policy.
  const auto index = http_get(port, "/");
  CHECK(index.status == 200);
  CHECK_THAT(index.headers, Contains("Content-Security-Policy: default-src 'self'"));
  CHECK_THAT(index.body, Contains("<script src=\"/console.js\""));
  CHECK(http_get(port, "/console.js").status == 200);
  CHECK(http_get(port, "/nothing-here").status == 404);
}

TEST_CASE("console actions are refused without the admin token, without the CSRF token and from another origin") {
  Pipeline p;
  const int port = p.port();
  const json retry = {{"action", "retry"}, {"kind", "inbox"}, {"group", poison_group(port)}};

  const auto no_token = post(port, "/api/v1/actions/preview", retry, {.token = ""});
  CHECK(no_token.status == 401);
  CHECK(error_code(no_token) == "ADMIN_TOKEN_REQUIRED");
  CHECK(post(port, "/api/v1/actions/preview", retry, {.token = "not-the-token"}).status == 401);
  const auto no_csrf = post(port, "/api/v1/actions/run", retry, {.csrf = false});
  CHECK(no_csrf.status == 403);
  CHECK(error_code(no_csrf) == "CSRF_TOKEN_REQUIRED");
  const auto elsewhere = post(port, "/api/v1/actions/run", retry, {.origin = "http://evil.example"});
  CHECK(elsewhere.status == 403);
  CHECK(error_code(elsewhere) == "ORIGIN_REFUSED");
  CHECK(post(port, "/api/v1/actions/run", retry, {.origin = ""}).status == 403);
  CHECK(http_send(port, "GET", "/api/v1/actions/run", {}, "").status == 404);
  // Nothing was retried.
  CHECK(p.count("consumer = 'orders.v1' AND status = 'DEAD'") == Pipeline::kPoisoned);
  CHECK(p.db.scalar("SELECT count(*) FROM {schema}.operator_actions") == 0);
  // The admin token is the key: with everything else in place, the preview answers.
  const auto allowed = post(port, "/api/v1/actions/preview", retry);
  CHECK(allowed.status == 200);
  CHECK(get(port, "/api/v1/session", Pipeline::kAdminToken)["admin"] == true);
  CHECK(get(port, "/api/v1/session")["admin"] == false);
}

TEST_CASE("a console without an admin token is read-only") {
  Pipeline p([](RuntimeConfig& c) { c.console.admin_token.clear(); });
  const int port = p.port();
  const json retry = {{"action", "retry"}, {"kind", "inbox"}, {"group", poison_group(port)}};
  const auto refused = post(port, "/api/v1/actions/preview", retry, {.token = ""});
  CHECK(refused.status == 403);
  CHECK(error_code(refused) == "ACTIONS_DISABLED");
  CHECK(get(port, "/api/v1/session")["actions_enabled"] == false);
}

TEST_CASE("the admin token can come from a file") {
  char path[] = "/tmp/boxcar-console-token-XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << "token-from-a-file\n";
  Pipeline p([&](RuntimeConfig& c) {
    c.console.admin_token.clear();
    c.console.admin_token_file = path;
  });
  CHECK(get(p.port(), "/api/v1/session", "token-from-a-file")["admin"] == true);
  CHECK(get(p.port(), "/api/v1/session", "token-from-a-fil")["admin"] == false);
  std::remove(path);
}

TEST_CASE("console.admin_token is taken from the environment only, and config check hides it") {
  const auto from_flag = [] {
    load_config({.environment = std::vector<std::string>{"BOXCAR_DATABASE_URL=postgresql://x@localhost/db"},
                 .flags = {{"console.admin_token", "s3cret"}}});
  };
  try {
    from_flag();
    FAIL("a flag set the admin token");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "console.admin_token");
  }
  RuntimeConfig file_config;
  try {
    apply_config_file(file_config, R"({"console": {"admin_token": "s3cret"}})", "boxcar.json");
    FAIL("a configuration file set the admin token");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "console.admin_token");
  }
  const auto config = load_config(
      {.environment = std::vector<std::string>{"BOXCAR_DATABASE_URL=postgresql://x@localhost/db",
                                               "BOXCAR_CONSOLE_ADMIN_TOKEN=s3cret", "BOXCAR_CONSOLE_ENABLED=true"}});
  CHECK(config.console.admin_token == "s3cret");
  CHECK(config.console.enabled);
  for (const auto& [key, value] : describe(config)) CHECK(value.find("s3cret") == std::string::npos);
}

TEST_CASE("a console action shows its row count, runs only with that count confirmed, and is recorded") {
  Pipeline p;
  const int port = p.port();
  const std::string group = poison_group(port);
  const json retry = {{"action", "retry"}, {"kind", "inbox"}, {"group", group}};

  const auto preview = post(port, "/api/v1/actions/preview", retry);
  REQUIRE(preview.status == 200);
  CHECK(json::parse(preview.body)["rows"] == Pipeline::kPoisoned);

  // A stale or wrong count changes nothing.
  json stale = retry;
  stale.update({{"confirm_rows", Pipeline::kPoisoned - 1}, {"actor", "alice"}});
  const auto refused = post(port, "/api/v1/actions/run", stale);
  CHECK(refused.status == 409);
  CHECK(error_code(refused) == "CONFIRMATION_MISMATCH");
  CHECK(p.count("consumer = 'orders.v1' AND status = 'DEAD'") == Pipeline::kPoisoned);
  json no_actor = retry;
  no_actor["confirm_rows"] = Pipeline::kPoisoned;
  CHECK(post(port, "/api/v1/actions/run", no_actor).status == 400);

  p.poison = false;
  json confirmed = retry;
  confirmed.update({{"confirm_rows", Pipeline::kPoisoned}, {"actor", "alice"}});
  const auto done = post(port, "/api/v1/actions/run", confirmed);
  REQUIRE(done.status == 200);
  CHECK(json::parse(done.body)["rows"] == Pipeline::kPoisoned);
  REQUIRE(eventually([&] { return p.count("consumer = 'orders.v1' AND status = 'COMPLETED'") == 8; }, 30s));
  CHECK(p.count("message_id LIKE 'poison-%' AND last_replayed_by = 'console:alice' AND replay_count = 1") ==
        Pipeline::kPoisoned);
  const auto actions = get(port, "/api/v1/actions")["actions"];
  REQUIRE(actions.size() == 1);
  CHECK(actions[0]["actor"] == "console:alice");
  CHECK(actions[0]["action"] == "retry");
  CHECK(actions[0]["target"] == "group " + group);
  CHECK(actions[0]["rows"] == Pipeline::kPoisoned);
  CHECK(actions[0]["at"].is_string());

  // Unblocking the key records who released it, and the key's next receipts run.
  const json unblock = {{"action", "unblock"},
                        {"kind", "inbox"},
                        {"key", "k1"},
                        {"consumer", Pipeline::kShipments},
                        {"scope", "tenant:acme"}};
  const auto unblock_preview = post(port, "/api/v1/actions/preview", unblock);
  REQUIRE(unblock_preview.status == 200);
  CHECK(json::parse(unblock_preview.body)["rows"] == 1);
  json unblock_run = unblock;
  unblock_run.update({{"confirm_rows", 1}, {"actor", "bob"}});
  REQUIRE(post(port, "/api/v1/actions/run", unblock_run).status == 200);
  CHECK(p.count("message_id = 'ship-k1-0' AND key_released_by = 'console:bob' AND status = 'DEAD'") == 1);
  REQUIRE(eventually([&] { return p.count("consumer = 'shipments.v1' AND status = 'COMPLETED'") == 3; }, 30s));
  const auto receipt_id = p.db.scalar("SELECT id FROM {schema}.inbox_receipts WHERE message_id = 'ship-k1-0'");
  CHECK(get(port, "/api/v1/dead/records/" + std::to_string(receipt_id))["key_released"]["by"] == "console:bob");
  CHECK(get(port, "/api/v1/actions")["actions"].size() == 2);
}

TEST_CASE("a DEAD receipt shows its payload only to an admin, redacted as the logs are") {
  Pipeline p;
  const auto id = p.db.scalar("SELECT id FROM {schema}.inbox_receipts WHERE message_id = 'poison-6'");
  const std::string path = "/api/v1/dead/records/" + std::to_string(id);
  const auto plain = get(p.port(), path);
  CHECK(plain["content_shown"] == false);
  CHECK_FALSE(plain.contains("payload"));
  CHECK(plain["message_id"] == "poison-6");
  CHECK(plain["consumer"] == Pipeline::kOrders);
  CHECK_THAT(plain["last_error"].get<std::string>(), Contains("card declined for order 1006"));
  const auto admin = get(p.port(), path, Pipeline::kAdminToken);
  CHECK(admin["content_shown"] == true);
  CHECK(admin["payload"]["order"] == 1006);
  CHECK(admin["payload"]["card"]["number"] == "4111");
  CHECK(admin["payload"]["card"]["password"] == "***");
  CHECK(admin.dump().find("hunter2") == std::string::npos);
  const auto missing = http_get(p.port(), "/api/v1/dead/records/999999999");
  CHECK(missing.status == 404);
}

TEST_CASE("a DEAD group's receipts come in keyset pages that list each receipt once, read through the DEAD index") {
  TestDatabase db;
  // 3,000 DEAD receipts of one failure over two consumers (many sharing a timestamp), beside
  // 30,000 finished ones the pages must never read.
  db.execute(R"(
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, metadata, fingerprint,
     status, attempts, dead_reason, last_error_type, last_error, updated_at)
SELECT 'tenant', 't' || (i % 5), 'seed', CASE WHEN i % 2 = 0 THEN 'a.v1' ELSE 'b.v1' END, 'dead-' || i, 'thing.happened',
       1, '{}', '{}', repeat('0', 64), 'DEAD', 1, 'MAX_ATTEMPTS', 'E', 'timeout after ' || i || ' ms',
       TIMESTAMPTZ '2026-01-01' + (i / 7) * INTERVAL '1 second'
FROM generate_series(1, 3000) AS i)");
  db.execute(R"(
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, payload, metadata, fingerprint,
     status, attempts, completed_at)
SELECT 'tenant', 't1', 'seed', 'a.v1', 'done-' || i, 'thing.happened', 1, '{}', '{}', repeat('0', 64), 'COMPLETED', 1,
       pg_catalog.now()
FROM generate_series(1, 30000) AS i)");
  db.execute("ANALYZE {schema}.inbox_receipts");
  auto pool = db.pool();
  const auto groups = dead_groups(*pool, db.schema(), RecordKind::Inbox);
  REQUIRE(groups.size() == 1);
  std::set<std::int64_t> seen;
  std::optional<GroupCursor> after;
  int pages = 0;
  for (;;) {
    const auto page = console_group_page(*pool, db.schema(), RecordKind::Inbox, groups[0].group, after, 250);
    for (const auto& r : page["records"]) CHECK(seen.insert(r["id"].get<std::int64_t>()).second);
    ++pages;
    if (page["next"].is_null()) break;
    after = GroupCursor{.consumer = page["next"]["consumer"].get<std::string>(),
                        .updated_at_us = page["next"]["updated_at_us"].get<std::int64_t>(),
                        .id = page["next"]["id"].get<std::int64_t>()};
    REQUIRE(pages < 100);
  }
  CHECK(seen.size() == 3000);
  CHECK(pages == 13);  // twelve full pages, then an empty one that ends the walk
  CHECK_THROWS_AS(console_group_page(*pool, db.schema(), RecordKind::Inbox, "not-a-group", std::nullopt, 10),
                  OperatorError);

  // The plan of the page statement itself, after a cursor (custom plans, as exec_params
  // gets): an index scan of the DEAD index from the cursor on, never a scan of the table.
  const auto statement = boxcar::detail::find_statement(boxcar::detail::ops_statements(), "console.inbox_group_page");
  REQUIRE(statement);
  pqxx::connection c(db.url());
  pqxx::nontransaction tx(c);
  tx.exec("SET plan_cache_mode = force_custom_plan");
  tx.exec("SET enable_bitmapscan = off");  // as console_group_page() sets them
  tx.exec("SET enable_sort = off");
  tx.exec("PREPARE page(text, text, double precision, bigint, bigint) AS " + db.qualified(std::string(*statement)));
  // The cursor: consumer a.v1, 2026-01-01 00:03:00 UTC, id 0.
  const auto plan =
      tx.exec("EXPLAIN (FORMAT JSON) EXECUTE page('" + groups[0].group + "', 'a.v1', 1767225780000000, 0, 250)")[0][0]
          .as<std::string>();
  INFO(plan);
  CHECK_THAT(plan, Contains("inbox_receipts_dead"));
  CHECK(plan.find("Seq Scan") == std::string::npos);
  CHECK(plan.find("Bitmap") == std::string::npos);
  // Rows come in index order; only the ties of one timestamp are sorted (by id), so the
  // LIMIT stops the scan.
  CHECK_THAT(plan, Contains("\"Node Type\": \"Incremental Sort\""));
  CHECK(plan.find("\"Node Type\": \"Sort\"") == std::string::npos);
  // Printed for docs/console.md ("Cost and plans") with BOXCAR_PRINT_PLANS=1.
  if (std::getenv("BOXCAR_PRINT_PLANS")) {
    std::string text;
    for (const auto& row :
         tx.exec("EXPLAIN (COSTS OFF) EXECUTE page('" + groups[0].group + "', 'a.v1', 1767225780000000, 0, 250)"))
      text += row[0].as<std::string>() + "\n";
    std::cout << text;
  }
}

TEST_CASE("the console role reads every panel and no payload; the operator role records the actions") {
  Pipeline p;
  SnapshotHolder holder(p.db);
  const RolesOptions options{.schema = p.db.schema(), .role_prefix = p.db.schema() + "_"};
  const RoleNames names = role_names(options);
  apply_roles(p.db.url(), options);
  const auto server = p.db.query(
      "SELECT host(inet_server_addr()) AS host, inet_server_port() AS port, current_database() AS dbname")[0];
  const std::string base = "host=" + server["host"].as<std::string>() + " port=" + server["port"].as<std::string>() +
                           " dbname=" + server["dbname"].as<std::string>();
  const std::string console_login = names.console + "_login";
  const std::string operator_login = names.operator_ + "_login";
  p.db.execute("CREATE ROLE " + quote_identifier(console_login) + " LOGIN IN ROLE " + quote_identifier(names.console) +
               ", pg_read_all_stats");
  p.db.execute("CREATE ROLE " + quote_identifier(operator_login) + " LOGIN IN ROLE " +
               quote_identifier(names.operator_));
  {
    auto reads = ConnectionPool::create({.url = base + " user=" + console_login, .size = 2});
    auto writes = ConnectionPool::create({.url = base + " user=" + operator_login, .size = 2});
    const auto overview = console_overview(*reads, p.db.schema(), {Pipeline::kOrders});
    CHECK(overview["inbox"]["consumers"][0]["consumer"] == Pipeline::kOrders);
    const auto groups = console_dead_groups(*reads, p.db.schema(), RecordKind::Inbox);
    REQUIRE_FALSE(groups["groups"].empty());
    const std::string group = groups["groups"][0]["group"].get<std::string>();
    CHECK_FALSE(
        console_group_page(*reads, p.db.schema(), RecordKind::Inbox, group, std::nullopt, 10)["records"].empty());
    CHECK(console_dead_groups(*reads, p.db.schema(), RecordKind::Outbox)["groups"].empty());
    const auto id = p.db.scalar("SELECT id FROM {schema}.inbox_receipts WHERE message_id = 'poison-6'");
    CHECK(console_record(*reads, p.db.schema(), RecordKind::Inbox, id)["message_id"] == "poison-6");
    CHECK(console_blocked_keys(*reads, p.db.schema())["keys"].size() == 1);
    const auto health = database_health_document(*reads, p.db.schema());
    CHECK(health["xmin_holders"][0]["pid"] == holder.pid);
    CHECK(health["xmin_holders"][0]["application_name"] == "forgotten-psql");

    // No payload, metadata or header, by any path the console role has.
    for (const std::string sql :
         {"SELECT payload FROM {schema}.inbox_receipts", "SELECT metadata FROM {schema}.inbox_receipts",
          "SELECT payload FROM {schema}.inbox_dead_records", "SELECT payload FROM {schema}.outbox_events",
          "SELECT headers FROM {schema}.outbox_events", "SELECT fingerprint FROM {schema}.inbox_receipts",
          "UPDATE {schema}.inbox_receipts SET status = 'PENDING'",
          "INSERT INTO {schema}.operator_actions (actor, action, kind, target, row_count) "
          "VALUES ('x', 'retry', 'inbox', 'x', 0)"}) {
      INFO(sql);
      pqxx::connection c(base + " user=" + console_login);
      pqxx::work tx(c);
      CHECK_THROWS_AS(tx.exec(p.db.qualified(sql)), pqxx::insufficient_privilege);
    }

    // The operator role: an action and its record, the released key's actor.
    record_operator_action(*writes, p.db.schema(), "console:carol", "discard", RecordKind::Inbox,
                           "id " + std::to_string(id), 1);
    CHECK(unblock_key(*writes, p.db.schema(), {.key = "k1", .actor = "console:carol"}).size() == 1);
    CHECK(console_actions(*reads, p.db.schema())["actions"][0]["actor"] == "console:carol");
  }
  p.runtime->stop();
  p.db.execute("DROP ROLE " + quote_identifier(console_login));
  p.db.execute("DROP ROLE " + quote_identifier(operator_login));
  drop_roles(p.db.url(), options);
}

TEST_CASE("boxcar status names the session holding back the xmin horizon") {
  TestDatabase db;
  SnapshotHolder holder(db);
  const auto report = status(*db.pool(), db.schema(), {});
  REQUIRE(report.xmin_holder.has_value());
  CHECK(report.xmin_holder->pid == holder.pid);
  CHECK(report.xmin_holder->application_name == "forgotten-psql");
  CHECK(report.xmin_holder->state == "idle in transaction");
  CHECK(report.xmin_holder->transaction_age.count() >= 0);
  CHECK(to_json(report)["xmin_holder"]["pid"] == holder.pid);
  CHECK_THAT(to_table(report), Contains("XMIN HORIZON"));
  CHECK_THAT(to_table(report), Contains(std::to_string(holder.pid)));
  holder.tx->commit();
  CHECK_FALSE(status(*db.pool(), db.schema(), {}).xmin_holder.has_value());
}

TEST_CASE("a DEAD outbox event is shown without its content and retried through the console") {
  TestDatabase db;
  {
    OutboxEmitter outbox(db.pool(), {.schema = db.schema(), .notify = false});
    Tx tx = db.pool()->begin();
    outbox.emit(tx,
                OutboxMessage{.event_type = "order.projected",
                              .schema_version = 1,
                              .topic = "orders.projected",
                              .payload = {{"order", 7}, {"api_key", "k-123"}}},
                {.scope = Scope::tenant("t1")});
    tx.commit();
  }
  db.execute(
      "UPDATE {schema}.outbox_events SET status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', attempts = 5, "
      "last_error = 'broker down for 30 s'");
  const auto id = db.scalar("SELECT id FROM {schema}.outbox_events");
  Runtime runtime(console_config(db));
  runtime.start(Role::Ingress);
  const int port = runtime.console_port();

  const auto groups = get(port, "/api/v1/dead/groups?kind=outbox")["groups"];
  REQUIRE(groups.size() == 1);
  CHECK(groups[0]["topics"] == json::array({"orders.projected"}));
  CHECK(groups[0]["failure"] == "ATTEMPTS_EXHAUSTED: broker down for <n> s");
  const auto page = get(port, "/api/v1/dead/groups/" + groups[0]["group"].get<std::string>() + "?kind=outbox");
  REQUIRE(page["records"].size() == 1);
  CHECK(page["records"][0]["topic"] == "orders.projected");
  const auto shown = get(port, "/api/v1/dead/records/" + std::to_string(id) + "?kind=outbox");
  CHECK(shown["topic"] == "orders.projected");
  CHECK(shown["scope"] == "tenant:t1");
  CHECK_FALSE(shown.contains("payload"));
  const auto admin = get(port, "/api/v1/dead/records/" + std::to_string(id) + "?kind=outbox", Pipeline::kAdminToken);
  CHECK(admin["payload"]["order"] == 7);
  CHECK(admin["payload"]["api_key"] == "***");
  CHECK(get(port, "/api/v1/overview")["outbox"]["recent_errors"][0]["id"] == id);

  const json retry = {{"action", "retry"}, {"kind", "outbox"}, {"id", id}};
  const auto preview = post(port, "/api/v1/actions/preview", retry);
  REQUIRE(preview.status == 200);
  CHECK(json::parse(preview.body)["rows"] == 1);
  json run = retry;
  run.update({{"confirm_rows", 1}, {"actor", "dave"}});
  REQUIRE(post(port, "/api/v1/actions/run", run).status == 200);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING' AND attempts = 0 "
                  "AND last_replayed_by = 'console:dave'") == 1);
  const auto actions = get(port, "/api/v1/actions")["actions"];
  REQUIRE(actions.size() == 1);
  CHECK(actions[0]["kind"] == "outbox");
  CHECK(actions[0]["target"] == "id " + std::to_string(id));
  runtime.stop();
}
