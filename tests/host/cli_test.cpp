// The operator commands through the `boxcar` binary, as an operator runs them.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <cstdio>

#include "boxcar/inbox/inbox.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::TestDatabase;

namespace {

struct Run {
  int exit_code;
  std::string output;
};

Run boxcar_cli(const TestDatabase& db, const std::string& arguments) {
  const std::string command = "BOXCAR_DATABASE_URL='" + db.url() + "' BOXCAR_SCHEMA=" + db.schema() +
                              " BOXCAR_CONSUMERS=orders.v1,audit.v1 BOXCAR_LOG_LEVEL=warn " + BOXCAR_CLI_PATH + " " +
                              arguments + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[4096];
  while (fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pclose(pipe);
  return {WEXITSTATUS(status), output};
}

std::int64_t accept_dead(TestDatabase& db, Inbox& inbox, const std::string& id, const std::string& error) {
  const auto receipt = inbox.accept({.scope = Scope::tenant("t1"),
                                     .source = "s",
                                     .consumer = "orders.v1",
                                     .message_id = id,
                                     .event_type = "order.created",
                                     .schema_version = 1,
                                     .payload = {{"id", id}}});
  db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', attempts = 3, "
      "finished_attempts = 3, last_error_type = 'std::runtime_error', last_error = '" +
      error + "' WHERE id = " + std::to_string(receipt.id));
  return receipt.id;
}

}  // namespace

TEST_CASE("boxcar status shows the backlog per consumer and status, as a table and as JSON") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1", "audit.v1"}, .notify = false});
  accept_dead(db, inbox, "d-1", "order 17 failed");
  inbox.accept({.scope = Scope::global(),
                .source = "s",
                .consumer = "orders.v1",
                .message_id = "p-1",
                .event_type = "order.created",
                .schema_version = 1,
                .payload = {{"n", 1}}});
  const Run table = boxcar_cli(db, "status");
  CHECK(table.exit_code == 0);
  CHECK(table.output.find("orders.v1") != std::string::npos);
  CHECK(table.output.find("audit.v1") != std::string::npos);  // declared, no rows: still listed
  const Run json = boxcar_cli(db, "status --json");
  REQUIRE(json.exit_code == 0);
  const auto report = nlohmann::json::parse(json.output);
  INFO(json.output);
  bool found = false;
  for (const auto& c : report.at("inbox").at("consumers")) {
    if (c.at("consumer") != "orders.v1") continue;
    found = true;
    CHECK(c.at("pending") == 1);
    CHECK(c.at("dead") == 1);
  }
  CHECK(found);
}

TEST_CASE("boxcar dead retry resets matching DEAD receipts and records who did it, and a dry run changes nothing") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  const auto a = accept_dead(db, inbox, "d-1", "order 17 failed: timeout");
  accept_dead(db, inbox, "d-2", "order 18 failed: timeout");
  accept_dead(db, inbox, "d-3", "schema mismatch");

  const Run dry = boxcar_cli(db, "dead retry --error timeout --dry-run");
  CHECK(dry.exit_code == 0);
  CHECK(dry.output.find("would retry 2") != std::string::npos);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 3);

  const Run grouped = boxcar_cli(db, "dead list --group --json");
  REQUIRE(grouped.exit_code == 0);
  // "order <n> failed: timeout" and "schema mismatch"
  CHECK(nlohmann::json::parse(grouped.output).at("groups").size() == 2);

  const Run retry = boxcar_cli(db, "dead retry --id " + std::to_string(a) + " --actor alice");
  CHECK(retry.exit_code == 0);
  const auto row = db.query(
      "SELECT status, attempts, replay_count, last_replayed_by FROM {schema}.inbox_receipts "
      "WHERE id = " +
      std::to_string(a))[0];
  CHECK(row[0].as<std::string>() == "PENDING");
  CHECK(row[1].as<int>() == 0);
  CHECK(row[2].as<int>() == 1);
  CHECK(row[3].as<std::string>() == "alice");
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 2);

  const Run refused = boxcar_cli(db, "dead retry");
  CHECK(refused.exit_code == 1);
  CHECK(refused.output.find("DEAD_FILTER_REQUIRED") != std::string::npos);
}

TEST_CASE("boxcar dead discard keeps the identity so a redelivery is still a duplicate") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  const auto id = accept_dead(db, inbox, "d-1", "poison");
  const Run discard = boxcar_cli(db, "dead discard --id " + std::to_string(id));
  CHECK(discard.exit_code == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE discarded_at IS NOT NULL") == 1);
  CHECK(boxcar_cli(db, "dead list --json").output.find("\"d-1\"") == std::string::npos);
  const auto again = inbox.accept({.scope = Scope::tenant("t1"),
                                   .source = "s",
                                   .consumer = "orders.v1",
                                   .message_id = "d-1",
                                   .event_type = "order.created",
                                   .schema_version = 1,
                                   .payload = {{"id", "d-1"}}});
  CHECK(again.kind == Receipt::Kind::Duplicate);
}

TEST_CASE("boxcar purge deletes only finished rows past retention") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  for (int i = 0; i < 5; ++i)
    inbox.accept({.scope = Scope::global(),
                  .source = "s",
                  .consumer = "orders.v1",
                  .message_id = "m-" + std::to_string(i),
                  .event_type = "order.created",
                  .schema_version = 1,
                  .payload = {{"n", i}}});
  db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'COMPLETED', completed_at = now() - interval '40 days' "
      "WHERE message_id IN ('m-0', 'm-1', 'm-2')");
  db.query("UPDATE {schema}.inbox_receipts SET status = 'COMPLETED', completed_at = now() WHERE message_id = 'm-3'");
  const Run purged = boxcar_cli(db, "purge --inbox-days 30 --batch-size 2 --json");
  REQUIRE(purged.exit_code == 0);
  CHECK(nlohmann::json::parse(purged.output).at("inbox_deleted") == 3);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 2);
  CHECK(boxcar_cli(db, "purge --inbox-days x").exit_code == 2);
  // A retention shorter than the redelivery horizon would let a redelivery in as new.
  const Run refused = boxcar_cli(db, "purge --inbox-days 1 --redelivery-horizon-days 3");
  CHECK(refused.exit_code == 2);
  CHECK(refused.output.find("--redelivery-horizon-days") != std::string::npos);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 2);
}
