// The command line of run_cli, through the `boxcar` binary as an operator types it:
// configuration flags before or after the command, each command's own --help, and usage
// errors (exit status 2) that name the offending argument.
#include <catch2/catch.hpp>

#include <signal.h>

#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "child_process.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

ProcessResult boxcar_cli(const std::string& arguments, const std::vector<std::string>& environment = {}) {
  return run_process(BOXCAR_CLI_PATH, split_words(arguments), environment, 30s);
}

void emit_events(TestDatabase& db, int count) {
  OutboxEmitter outbox(db.pool(), {.schema = db.schema(), .notify = false});
  Tx tx = db.pool()->begin();
  for (int i = 0; i < count; ++i)
    outbox.emit(
        tx,
        OutboxMessage{
            .event_type = "order.projected", .schema_version = 1, .topic = "orders.projected", .payload = {{"n", i}}},
        {.scope = Scope::global()});
  tx.commit();
}

}  // namespace

TEST_CASE("configuration flags given after the command take effect as they do before it") {
  // No BOXCAR_* environment at all: everything comes from the flags after `config check`.
  const auto after = boxcar_cli(
      "config check --database-url postgresql://u:pw@h/db --schema after --topic order.created=orders "
      "--kafka client.id=cli-test --set worker.concurrency=3 --consumers a,b --log-level warn");
  INFO(after.output);
  REQUIRE(after.exit_code == 0);
  CHECK(after.output.find("database.url = postgresql://u:***@h/db") != std::string::npos);
  CHECK(after.output.find("schema = after") != std::string::npos);
  CHECK(after.output.find("publisher.topics.order.created = orders") != std::string::npos);
  CHECK(after.output.find("kafka.client.id = cli-test") != std::string::npos);
  CHECK(after.output.find("worker.concurrency = 3") != std::string::npos);
  CHECK(after.output.find("consumers = a,b") != std::string::npos);
  CHECK(after.output.find("log.level = warn") != std::string::npos);

  // Flags beat the environment wherever they stand; a later flag beats an earlier one.
  const auto mixed =
      boxcar_cli("--schema before --set worker.batch_size=2 config check --schema after",
                 {"BOXCAR_DATABASE_URL=postgresql://h/db", "BOXCAR_SCHEMA=env", "BOXCAR_WORKER_BATCH_SIZE=7"});
  INFO(mixed.output);
  REQUIRE(mixed.exit_code == 0);
  CHECK(mixed.output.find("schema = after") != std::string::npos);
  CHECK(mixed.output.find("worker.batch_size = 2") != std::string::npos);
}

TEST_CASE("status reaches the database named by --database-url after the command") {
  TestDatabase db;
  const auto result = boxcar_cli("status --database-url " + db.url() + " --schema " + db.schema() + " --json");
  INFO(result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(nlohmann::json::parse(result.output).at("schema") == db.schema());
}

TEST_CASE("an unknown or misplaced argument exits with status 2 and names it") {
  // A database URL in the environment, so nothing fails for want of configuration.
  const std::vector<std::string> env = {"BOXCAR_DATABASE_URL=postgresql://127.0.0.1:1/none",
                                        "BOXCAR_HTTP_LISTEN=", "BOXCAR_KAFKA_BOOTSTRAP_SERVERS=127.0.0.1:1"};
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"status --bogus", "--bogus"},
      {"--bogus status", "--bogus"},
      {"--json status", "--json"},             // status's own flag before the command
      {"purge --id 3", "--id"},                // a dead-record filter given to purge
      {"dead list --actor alice", "--actor"},  // only retry and discard record an actor
      {"config check --dry-run", "--dry-run"},
      {"publisher --bogus x", "--bogus"},  // a role must not start with an argument it ignores
      {"publisher --concurrency 2", "--concurrency"},
      {"dead frob", "frob"},
      {"frob", "frob"},
      {"purge --inbox-days x", "--inbox-days"},
      {"dead list --older-than 3y", "--older-than"},
      {"dead show --kind elsewhere 1", "--kind"},
      {"config check --set nokey", "--set"},
  };
  for (const auto& [arguments, named] : cases) {
    const auto result = boxcar_cli(arguments, env);
    INFO("boxcar " << arguments << "\n" << result.output);
    CHECK(result.exit_code == 2);
    CHECK(result.output.find(named) != std::string::npos);
  }
}

TEST_CASE("every command prints its own options with --help and exits 0") {
  // Each command's help names its own options and leaves out other commands' options.
  struct Help {
    std::string arguments;
    std::vector<std::string> shows;
    std::vector<std::string> omits;
  };
  const std::vector<Help> cases = {
      {"--help",
       {"Usage: boxcar", "publisher", "status", "dead", "purge", "migrate", "--database-url"},
       {"--inbox-days"}},
      {"status --help", {"Usage: boxcar status", "--json", "--database-url"}, {"--inbox-days", "--actor"}},
      {"purge --help",
       {"Usage: boxcar purge", "--inbox-days", "--outbox-days", "--batch-size", "--dry-run"},
       {"--actor"}},
      {"dead --help", {"Usage: boxcar dead", "list", "show", "retry", "discard"}, {"--inbox-days"}},
      {"dead list --help",
       {"Usage: boxcar dead list", "--group", "--failure-group", "--older-than", "--kind"},
       {"--actor"}},
      {"dead show --help", {"Usage: boxcar dead show", "ID", "--kind"}, {"--failure-group"}},
      {"dead retry --help", {"Usage: boxcar dead retry", "--actor", "--all", "--dry-run", "--id"}, {"--inbox-days"}},
      {"dead discard --help", {"Usage: boxcar dead discard", "--actor", "--all", "--dry-run"}, {"--group "}},
      {"publisher --help", {"Usage: boxcar publisher", "--batch-size", "--topic", "--kafka"}, {"--json"}},
      {"worker --help", {"Usage: boxcar worker", "--set"}, {"--batch-size"}},
      {"all --help", {"Usage: boxcar all", "--set"}, {"--json"}},
      {"ingress --help", {"Usage: boxcar ingress", "--http-listen"}, {"--json"}},
      {"migrate --help", {"Usage: boxcar migrate", "--schema"}, {"--json"}},
      {"config check --help", {"Usage: boxcar config check", "--config"}, {"--json"}},
  };
  for (const auto& help : cases) {
    // No configuration at all: help needs none.
    const auto result = boxcar_cli(help.arguments);
    INFO("boxcar " << help.arguments << "\n" << result.output);
    CHECK(result.exit_code == 0);
    for (const auto& text : help.shows) CHECK(result.output.find(text) != std::string::npos);
    for (const auto& text : help.omits) CHECK(result.output.find(text) == std::string::npos);
  }
}

TEST_CASE("the publisher routes events by a --topic given after the command") {
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders-v2", 2);
  emit_events(db, 3);
  ChildProcess publisher(BOXCAR_CLI_PATH,
                         {"publisher", "--topic", "order.projected=orders-v2", "--database-url", db.url(), "--schema",
                          db.schema(), "--kafka", "bootstrap.servers=" + kafka.bootstrap_servers(), "--http-listen", "",
                          "--set", "publisher.poll_interval_ms=100"},
                         {"BOXCAR_LOG_LEVEL=warn"});
  const bool published = eventually(
      [&] { return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == 3; });
  INFO(publisher.output());
  CHECK(published);
  publisher.signal(SIGTERM);
  CHECK(publisher.wait(30s) == 0);
  std::set<std::string> ids;
  for (const auto& record : kafka.read_all("orders-v2", 3, 20s)) ids.insert(record.headers.at("event_id"));
  CHECK(ids.size() == 3);
}

TEST_CASE("the publisher claims batches of the --batch-size given after the command") {
  TestDatabase db;
  emit_events(db, 5);
  // Kafka is unreachable, so claimed batches stay PUBLISHING (30 s delivery timeout)
  // and each one's size can be counted by its claim token.
  ChildProcess publisher(BOXCAR_CLI_PATH,
                         {"publisher", "--batch-size", "2", "--database-url", db.url(), "--schema", db.schema(),
                          "--kafka", "bootstrap.servers=127.0.0.1:1", "--http-listen", ""},
                         {"BOXCAR_LOG_LEVEL=warn"});
  const bool claimed = eventually(
      [&] { return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHING'") == 5; });
  INFO(publisher.output());
  REQUIRE(claimed);
  CHECK(db.scalar("SELECT count(DISTINCT claim_token) FROM {schema}.outbox_events") == 3);
  CHECK(db.scalar("SELECT max(n) FROM (SELECT count(*) AS n FROM {schema}.outbox_events GROUP BY claim_token) b") == 2);
}
