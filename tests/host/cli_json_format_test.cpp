// The versioned JSON documents of `boxcar status --json` and `boxcar dead list --json`
// against their field tables in docs/operator.md ("JSON formats"): every documented
// field is printed and every printed field is documented, so renaming or removing one
// (or adding one silently) fails here until the page and, for a removal or a rename,
// format_version change with it.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/ops/operator.hpp"
#include "child_process.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

// Field path -> the table's second column ("both", "inbox", "outbox" in the dead list
// table; the type in the status table), read from the section under `heading`.
std::map<std::string, std::string> documented_fields(const std::string& heading) {
  std::ifstream in(std::filesystem::path(BOXCAR_SOURCE_DIR) / "docs" / "operator.md");
  std::map<std::string, std::string> fields;
  bool inside = false;
  const std::regex row(R"(^\| `([^`]+)` \| ([^|]+?) \|)");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) {
      inside = line == heading;
      continue;
    }
    std::smatch m;
    if (inside && std::regex_search(line, m, row)) fields[m[1].str()] = m[2].str();
  }
  return fields;
}

// Every key path of `document`: "a", "a.b" for objects, "a", "a[].b" for arrays of
// objects (every element's keys).
void collect_paths(const nlohmann::json& value, const std::string& path, std::set<std::string>& out) {
  if (value.is_object()) {
    for (const auto& [key, child] : value.items()) {
      const std::string child_path = path.empty() ? key : path + "." + key;
      out.insert(child_path);
      collect_paths(child, child_path, out);
    }
  } else if (value.is_array()) {
    for (const auto& element : value)
      if (element.is_object()) collect_paths(element, path + "[]", out);
  }
}

std::set<std::string> paths(const nlohmann::json& document) {
  std::set<std::string> out;
  collect_paths(document, "", out);
  return out;
}

nlohmann::json run_json(const TestDatabase& db, const std::vector<std::string>& args) {
  const auto result = run_process(BOXCAR_CLI_PATH, args,
                                  {"BOXCAR_DATABASE_URL=" + db.url(), "BOXCAR_SCHEMA=" + db.schema(),
                                   "BOXCAR_CONSUMERS=orders.v1,ordered.v1", "BOXCAR_LOG_LEVEL=warn"},
                                  30s);
  INFO("boxcar " << args.at(0) << " ...\n" << result.output);
  REQUIRE(result.exit_code == 0);
  return nlohmann::json::parse(result.output);
}

// A schema where every array and object of the documents has its fields: a consumer with
// a DEAD receipt, an ordering key blocked by a DEAD head, a DEAD outbox event, and a
// session holding a snapshot open (status's xmin_holder).
struct Everything {
  TestDatabase db;
  std::unique_ptr<pqxx::connection> holder;
  std::unique_ptr<pqxx::transaction<pqxx::repeatable_read>> snapshot;

  Everything() {
    Inbox inbox(db.pool(), {.schema = db.schema(),
                            .consumers = {"orders.v1", "ordered.v1"},
                            .ordering = {{"ordered.v1", {.key = OrderingKey::payload_pointer("/key")}}},
                            .notify = false});
    for (const char* id : {"m-1", "m-2"})
      inbox.accept({.scope = Scope::tenant("t1"),
                    .source = "s",
                    .consumer = "orders.v1",
                    .message_id = id,
                    .event_type = "order.created",
                    .schema_version = 1,
                    .payload = {{"id", id}}});
    for (const char* id : {"k-1", "k-2"})  // k-2 waits behind k-1 on key "a"
      inbox.accept({.scope = Scope::global(),
                    .source = "s",
                    .consumer = "ordered.v1",
                    .message_id = id,
                    .event_type = "order.created",
                    .schema_version = 1,
                    .payload = {{"key", "a"}}});
    db.query(
        "UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', attempts = 3, "
        "finished_attempts = 3, last_error_type = 'std::runtime_error', last_error = 'order 17 failed' "
        "WHERE message_id IN ('m-1', 'k-1')");
    OutboxEmitter outbox(db.pool(), {.schema = db.schema(), .notify = false});
    Tx tx = db.pool()->begin();
    outbox.emit(
        tx,
        OutboxMessage{
            .event_type = "order.projected", .schema_version = 1, .topic = "orders.projected", .payload = {{"n", 1}}},
        {.scope = Scope::global()});
    tx.commit();
    db.query(
        "UPDATE {schema}.outbox_events SET status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', attempts = 5, "
        "last_error = 'broker down'");
    holder = std::make_unique<pqxx::connection>(db.url());
    snapshot = std::make_unique<pqxx::transaction<pqxx::repeatable_read>>(*holder);
    snapshot->exec("SELECT 1");
  }
};

}  // namespace

TEST_CASE("status --json prints format_version 1 and exactly the fields docs/operator.md documents") {
  Everything s;
  const auto document = run_json(s.db, {"status", "--json"});
  CHECK(document.at("format_version") == 1);
  CHECK(document.at("format_version") == kStatusFormatVersion);
  REQUIRE(document.at("blocked_keys").size() == 1);  // so its elements' fields are compared too
  REQUIRE(document.at("inbox").at("consumers").size() == 2);
  REQUIRE(document.at("xmin_holder").is_object());

  std::set<std::string> documented;
  for (const auto& [field, type] : documented_fields("### `boxcar status --json`")) documented.insert(field);
  REQUIRE(documented.size() > 20);  // the table was found
  CHECK(paths(document) == documented);
}

TEST_CASE("dead list --json prints format_version 1 and exactly the fields docs/operator.md documents per kind") {
  Everything s;
  const auto fields = documented_fields("### `boxcar dead list --json`");
  REQUIRE(fields.size() > 30);
  for (const std::string kind : {"inbox", "outbox"}) {
    for (const bool group : {false, true}) {
      INFO("--kind " << kind << (group ? " --group" : ""));
      std::vector<std::string> args = {"dead", "list", "--json", "--kind", kind};
      if (group) args.push_back("--group");
      const auto document = run_json(s.db, args);
      CHECK(document.at("format_version") == 1);
      CHECK(document.at("format_version") == kDeadListFormatVersion);
      CHECK(document.at("kind") == kind);
      REQUIRE_FALSE(document.at(group ? "groups" : "records").empty());
      // The documented fields of this variant: the kind's own and both kinds', under
      // `groups` with --group and under `records` without.
      std::set<std::string> expected;
      for (const auto& [field, for_kind] : fields) {
        if (for_kind != "both" && for_kind != kind) continue;
        if (field.starts_with(group ? "records" : "groups")) continue;
        expected.insert(field);
      }
      CHECK(paths(document) == expected);
    }
  }
}
