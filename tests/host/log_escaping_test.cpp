// Hostile message ids through the real accept and worker path, logged by a worker
// process in both log formats: a sender's id can neither start a log line of its own
// nor add a JSON key. The handler completes each message; log.level=debug makes the
// "receipt completed" line (with its message_id field) appear.
#include <catch2/catch.hpp>

#include <signal.h>

#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/testing/eventually.hpp"
#include "child_process.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

const std::vector<std::string> kHostileIds = {
    "m-newline\n[2026-01-01 00:00:00.000] [worker] [info] forged outcome=completed",
    "m-json\n{\"level\":\"info\",\"message\":\"forged\"}",
    "m-separators\x1e"
    "forged\x1f"
    "yes",
    "m-unicode\xc2\x85\xe2\x80\xa8"
    "forged",
    "m-quotes\" forged=\"yes\\",
};

// Accepts one message per hostile id, runs a worker process until all are COMPLETED,
// stops it, and returns what it wrote.
std::string worker_output(TestDatabase& db, const std::string& format) {
  create_app_table(db);
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  for (const auto& id : kHostileIds)
    inbox.accept({.scope = Scope::tenant("t1"),
                  .source = "test",
                  .consumer = "orders.v1",
                  .message_id = id,
                  .event_type = "order.created",
                  .schema_version = 1,
                  .payload = {{"orderId", "o"}}});
  ChildProcess worker(BOXCAR_TEST_APP_PATH, {"worker"},
                      {"BOXCAR_DATABASE_URL=" + db.url(), "BOXCAR_SCHEMA=" + db.schema(), "BOXCAR_CONSUMERS=orders.v1",
                       "BOXCAR_HTTP_LISTEN=127.0.0.1:0", "BOXCAR_WORKER_POLL_INTERVAL_MS=100", "BOXCAR_LOG_LEVEL=debug",
                       "BOXCAR_LOG_FORMAT=" + format});
  CHECK(eventually(
      [&] {
        return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") ==
               static_cast<std::int64_t>(kHostileIds.size());
      },
      20s));
  worker.signal(SIGTERM);
  CHECK(worker.wait(15s).has_value());
  return worker.output();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("in the JSON log format a hostile message id stays inside its message_id value") {
  TestDatabase db;
  const auto output = worker_output(db, "json");
  std::set<std::string> logged_ids;
  for (const auto& line : lines_of(output)) {
    INFO(line);
    if (line.find("forged") == std::string::npos && line.rfind("{", 0) != 0) continue;  // e.g. a CLI banner
    nlohmann::json parsed;
    REQUIRE_NOTHROW(parsed = nlohmann::json::parse(line));
    CHECK_FALSE(parsed.contains("forged"));
    CHECK_FALSE(parsed.contains("yes"));
    if (parsed.value("message", "") == "receipt completed")
      logged_ids.insert(parsed.at("message_id").get<std::string>());
  }
  // Each id round-trips exactly: JSON escaping loses nothing.
  CHECK(logged_ids == std::set<std::string>(kHostileIds.begin(), kHostileIds.end()));
}

TEST_CASE("in the text log format a hostile message id cannot start a line or add a field") {
  TestDatabase db;
  const auto output = worker_output(db, "text");
  int completed = 0;
  for (const auto& line : lines_of(output)) {
    INFO(line);
    if (line.find("forged") == std::string::npos) continue;
    // Only the real line mentions the id: it starts with the timestamp and carries the
    // id quoted and escaped.
    CHECK(line.rfind("[20", 0) == 0);
    CHECK_THAT(line, Contains("receipt completed"));
    CHECK_THAT(line, Contains(" message_id=\"m-"));
    CHECK(line.find('\x1e') == std::string::npos);
    CHECK(line.find("\xe2\x80\xa8") == std::string::npos);
    ++completed;
  }
  CHECK(completed == static_cast<int>(kHostileIds.size()));
  CHECK_THAT(output, Contains("message_id=\"m-newline\\n[2026-01-01 00:00:00.000] [worker] [info] forged "
                              "outcome=completed\""));
  CHECK_THAT(output, Contains("message_id=\"m-quotes\\\" forged=\\\"yes\\\\\""));
}
