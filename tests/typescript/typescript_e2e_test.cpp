// One inbox, two languages: a Node service built on clients/typescript accepts and emits
// into the tables, and the C++ worker, handlers and publisher take it from there. The
// Node side is test/drivers/drive.ts of the client, run as a child process; every count is
// checked here. Needs the client built (`unit/typescript: ...` builds it: a ctest fixture)
// and node; without node these tests exit 77 (skipped).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <thread>

#include "boxcar/core/roles.hpp"
#include "boxcar/inbox/worker.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/lambda_handler.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "boxcar/testing/pgbouncer.hpp"
#include "boxcar/testing/tcp_proxy.hpp"
#include "child_process.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

const std::string kConsumer = "orders.node.v1";

/// The node executable and the driver's argv for `mode` with `config`. Exits the test
/// binary with 77 (ctest: skipped) when node or the built client is missing.
std::vector<std::string> driver_args(const std::string& mode, const json& config) {
  const std::string node = BOXCAR_NODE_PATH;
  const std::string driver = BOXCAR_TYPESCRIPT_DRIVER;
  if (node.empty() || ::access(node.c_str(), X_OK) != 0 || ::access(driver.c_str(), R_OK) != 0) {
    std::cerr << "node (" << node << ") or the built client (" << driver << ") is missing: skipped\n";
    std::exit(77);
  }
  return {driver, mode, config.dump()};
}

/// The JSON of the driver's "result ..." line in `output`.
json result_of(const std::string& output) {
  INFO(output);
  const auto at = output.rfind("result ");
  REQUIRE(at != std::string::npos);
  return json::parse(output.substr(at + 7, output.find('\n', at) - at - 7));
}

/// Runs the Node driver in `mode` with `config` to its end and returns its result.
json drive(const std::string& mode, const json& config, std::chrono::milliseconds limit = 300s) {
  const ProcessResult result = run_process(BOXCAR_NODE_PATH, driver_args(mode, config), {}, limit);
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  return result_of(result.output);
}

std::int64_t multiples(std::int64_t count, std::int64_t every, std::int64_t remainder) {
  std::int64_t n = 0;
  for (std::int64_t i = 0; i < count; ++i) n += i % every == remainder ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE(
    "a Node ingress accepts 5,000 messages with redeliveries and conflicts, and C++ processes and publishes "
    "exactly them") {
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders.projected", 3);
  db.execute("CREATE TABLE {schema}.order_projection (order_id text PRIMARY KEY)");
  constexpr std::int64_t kCount = 5000;
  const json tally = drive("ingress", {{"url", db.url()},
                                       {"schema", db.schema()},
                                       {"consumer", kConsumer},
                                       {"count", kCount},
                                       {"redeliverEvery", 7},
                                       {"conflictEvery", 11},
                                       {"batchSize", 100},
                                       {"concurrency", 16}});
  CHECK(tally.at("accepted") == kCount);
  CHECK(tally.at("duplicate") == multiples(kCount, 7, 0));
  CHECK(tally.at("conflict") == multiples(kCount, 11, 1));
  CHECK(tally.at("other").empty());
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == kCount);

  auto pool = db.pool(8);
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false});
  const std::string table = db.qualified("{schema}.order_projection");
  Worker worker(pool, {.schema = db.schema(), .consumers = {kConsumer}},
                {{.consumer = kConsumer,
                  .supports = {{"order.created", 1}},
                  .handler = handler([&](const nlohmann::json& payload, HandlerContext& c) {
                    const std::string order_id = payload.at("orderId");
                    c.tx.exec("INSERT INTO " + table + " (order_id) VALUES ($1)", order_id);
                    outbox.emit(c.tx,
                                OutboxMessage{.event_type = "order.projected",
                                              .schema_version = 1,
                                              .topic = "orders.projected",
                                              .payload = {{"orderId", order_id}}},
                                {.scope = c.scope, .causation_id = c.message_id});
                  })}});
  std::size_t handled = 0;
  while (const std::size_t n = worker.drain()) handled += n;
  CHECK(handled == kCount);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == kCount);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.order_projection") == kCount);

  Publisher publisher(
      pool,
      {.schema = db.schema(), .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}}, .delivery_timeout = 30s});
  std::size_t published = 0;
  while (const std::size_t n = publisher.drain()) published += n;
  CHECK(published == kCount);
  const auto records = kafka.read_all("orders.projected", kCount, 60s);
  std::set<std::pair<int, std::int64_t>> copies;
  std::set<std::string> orders;
  for (const auto& r : records) {
    copies.emplace(r.partition, r.offset);
    orders.insert(nlohmann::json::parse(r.value).at("orderId").get<std::string>());
  }
  CHECK(copies.size() == kCount);
  CHECK(orders.size() == kCount);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == kCount);
}

TEST_CASE("the same identity accepted from Node and from C++ at once: exactly one is accepted and one row stored") {
  TestDatabase db;
  auto pool = db.pool(2);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  constexpr int kRounds = 60;
  const std::string go = (std::filesystem::temp_directory_path() / ("boxcar-race-" + db.schema() + "-")).string();
  json config = {
      {"url", db.url()}, {"schema", db.schema()}, {"consumer", kConsumer}, {"rounds", kRounds}, {"goPrefix", go}};
  ChildProcess node(BOXCAR_NODE_PATH, driver_args("race", config), {});
  // The driver prints "ready" once its connection is open; until then no round starts.
  REQUIRE(eventually([&] { return node.output().find("ready") != std::string::npos; }, 30s));
  int cpp_accepted = 0;
  for (int i = 0; i < kRounds; ++i) {
    std::ofstream(go + std::to_string(i)).close();  // Node goes
    const Receipt r = inbox.accept({.scope = Scope::tenant("tenant-7"),
                                    .source = "node-ingress",
                                    .consumer = kConsumer,
                                    .message_id = "race-" + std::to_string(i),
                                    .event_type = "order.created",
                                    .schema_version = 1,
                                    .payload = {{"orderId", "o-" + std::to_string(i)}},
                                    .metadata = {.correlation_id = "corr-race-" + std::to_string(i)}});
    cpp_accepted += r.kind == Receipt::Kind::Accepted ? 1 : 0;
  }
  const auto exit_code = node.wait(60s);
  for (int i = 0; i < kRounds; ++i) std::filesystem::remove(go + std::to_string(i));
  INFO(node.output());
  REQUIRE(exit_code == 0);
  const json result = result_of(node.output());
  int node_accepted = 0;
  for (const auto& outcome : result.at("outcomes")) {
    CHECK((outcome == "accepted" || outcome == "duplicate"));
    node_accepted += outcome == "accepted" ? 1 : 0;
  }
  // One accepted per identity, whichever side won it; the same fingerprint on both sides
  // makes the loser a duplicate, never a conflict.
  CHECK(node_accepted + cpp_accepted == kRounds);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == kRounds);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.inbox_receipts") == kRounds);
}

TEST_CASE("a Node service emits in its own transactions and the publisher delivers exactly the committed events") {
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders.placed", 2);
  db.execute("CREATE TABLE {schema}.node_orders (order_id text PRIMARY KEY)");
  const json result = drive("emitter", {{"url", db.url()},
                                        {"schema", db.schema()},
                                        {"topic", "orders.placed"},
                                        {"transactions", 300},
                                        {"rollbackEvery", 3}});
  const auto& committed = result.at("committed");
  CHECK(committed.size() == 200);
  CHECK(result.at("rolledBack").size() == 100);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.node_orders") == 200);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 200);

  auto pool = db.pool(4);
  Publisher publisher(
      pool,
      {.schema = db.schema(), .kafka = {{"bootstrap.servers", kafka.bootstrap_servers()}}, .delivery_timeout = 30s});
  std::size_t published = 0;
  while (const std::size_t n = publisher.drain()) published += n;
  CHECK(published == 200);
  const auto records = kafka.read_all("orders.placed", 200, 30s);
  std::set<std::string> delivered;
  for (const auto& r : records) {
    delivered.insert(r.headers.at("event_id"));
    CHECK(r.headers.at("event_type") == "order.placed");
    CHECK(r.headers.at("tenant_id") == "tenant-7");
  }
  const std::set<std::string> expected(committed.begin(), committed.end());
  CHECK(delivered == expected);
}

TEST_CASE("a lost COMMIT reply makes the Node client's batch STORAGE_UNCERTAIN, and its redelivery reconciles it") {
  TestDatabase db;
  const auto url = db.url();
  const auto host_port = url.substr(url.find('@') + 1);
  TcpProxy proxy("127.0.0.1", std::stoi(host_port.substr(host_port.find(':') + 1)));
  proxy.drop_response_to("COMMIT");  // the next COMMIT lands; its answer never arrives
  const json result = drive(
      "lost-commit", {{"url", proxy.route(url)}, {"schema", db.schema()}, {"consumer", kConsumer}, {"count", 20}});
  CHECK(result.at("first") == "STORAGE_UNCERTAIN");
  // The COMMIT had landed: the redelivered batch and a single redelivery are duplicates.
  REQUIRE(result.at("again").size() == 20);
  for (const auto& kind : result.at("again")) CHECK(kind == "duplicate");
  CHECK(result.at("single") == "duplicate");
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 20);
}

TEST_CASE(
    "a lost reply to the Node client's autocommit insert is STORAGE_UNCERTAIN, and the redelivery is a duplicate") {
  TestDatabase db;
  const auto url = db.url();
  const auto host_port = url.substr(url.find('@') + 1);
  TcpProxy proxy("127.0.0.1", std::stoi(host_port.substr(host_port.find(':') + 1)));
  const std::string go = (std::filesystem::temp_directory_path() / ("boxcar-lost-reply-" + db.schema())).string();
  ChildProcess node(
      BOXCAR_NODE_PATH,
      driver_args("lost-reply",
                  {{"url", proxy.route(url)}, {"schema", db.schema()}, {"consumer", kConsumer}, {"go", go}}),
      {});
  REQUIRE(eventually([&] { return node.output().find("ready") != std::string::npos; }, 30s));
  proxy.drop_next_response();  // the insert runs and commits; its answer never arrives
  std::ofstream(go).close();
  const auto exit_code = node.wait(60s);
  std::filesystem::remove(go);
  INFO(node.output());
  REQUIRE(exit_code == 0);
  const json result = result_of(node.output());
  CHECK(result.at("first") == "STORAGE_UNCERTAIN");
  CHECK(result.at("redelivered") == "duplicate");
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);
}

TEST_CASE("behind PgBouncer in transaction pooling the Node client accepts, deduplicates, emits and reads status") {
  if (!PgBouncer::available()) {
    std::cerr << "pgbouncer is not installed: skipped\n";
    std::exit(77);
  }
  TestDatabase db;
  // Two server connections for twelve client connections: every statement may run on
  // another server session, so named statements or session state would break.
  PgBouncer bouncer(db.url(), {.pool_mode = "transaction", .pool_size = 2});
  const json result = drive("pgbouncer", {{"url", bouncer.route(db.url())},
                                          {"schema", db.schema()},
                                          {"consumer", kConsumer},
                                          {"count", 200},
                                          {"emits", 60}});
  const auto& tally = result.at("tally");
  CHECK(tally.at("accepted") == 400);
  CHECK(tally.at("duplicate") == 200);
  CHECK(tally.at("other").empty());
  CHECK(result.at("emitted") == 60);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 400);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events") == 60);
  const auto& status = result.at("status");
  CHECK(status.at("inbox").at("totals").at("pending") == 400);
  CHECK(status.at("outbox").at("pending") == 60);
}
