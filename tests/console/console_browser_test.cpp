// The operator console in a real browser (label console): a pipeline with a poison group,
// a blocked key and a session holding a snapshot, the console served by the Runtime, and
// browser_test.mjs driving Debian's Chromium or Firefox ESR through it (docs/console.md,
// "Tests"). `--browser chromium|firefox` picks the browser (ctest runs both); the same
// scenario and checks run in each. Exits 77 (skipped) only when that browser or node is not
// installed; npm ci installs the pinned puppeteer-core first.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "boxcar/ops/operator.hpp"
#include "child_process.hpp"
#include "console_pipeline.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

struct Browser {
  std::string name;  // browser_test.mjs's BROWSER
  std::string executable;
};

const Browser kBrowsers[] = {{"chromium", "/usr/bin/chromium"}, {"firefox", "/usr/bin/firefox-esr"}};

// The one --browser names; main() sets it before the test runs.
const Browser* chosen_browser = nullptr;

std::string node_path() {
  for (const char* candidate : {"/usr/bin/node", "/usr/local/bin/node"})
    if (::access(candidate, X_OK) == 0) return candidate;
  return {};
}

std::string screenshot_dir() {
  const char* chosen = std::getenv("BOXCAR_CONSOLE_SCREENSHOTS");
  return chosen && *chosen ? chosen : BOXCAR_CONSOLE_BUILD_DIR "/screenshots";
}

}  // namespace

TEST_CASE("the console in a browser shows what the database holds, refuses unguarded actions and retries a group") {
  const Browser& browser_under_test = *chosen_browser;
  INFO("browser: " << browser_under_test.name << " (" << browser_under_test.executable << ")");
  const auto installed = run_process(BOXCAR_CONSOLE_TEST_DIR "/install_deps.sh", {}, {}, 300s);
  INFO(installed.output);
  REQUIRE(installed.exit_code == 0);

  ConsolePipeline p;
  // A forgotten psql: a REPEATABLE READ snapshot held open.
  pqxx::connection holder(p.db.url());
  pqxx::nontransaction(holder).exec("SET application_name = 'forgotten-psql'");
  pqxx::transaction<pqxx::repeatable_read> snapshot(holder);
  snapshot.exec("SELECT 1");  // a snapshot, and no lock that DDL would wait for
  const int holder_pid = snapshot.exec("SELECT pg_backend_pid()")[0][0].as<int>();

  // What the database holds, as `boxcar status` counts it exactly.
  const auto report = status(*p.db.pool(), p.db.schema(), {ConsolePipeline::kOrders, ConsolePipeline::kShipments});
  nlohmann::json expect;
  for (const auto& c : report.inbox)
    expect["consumers"][c.consumer] = {{"pending", c.pending},
                                       {"retryable", c.retryable},
                                       {"processing", c.processing},
                                       {"waiting", c.waiting},
                                       {"dead", c.dead}};
  expect["outbox_unpublished"] =
      report.outbox.pending + report.outbox.waiting + report.outbox.publishing + report.outbox.retryable;
  const auto groups =
      dead_groups(*p.db.pool(), p.db.schema(), RecordKind::Inbox, {.consumer = ConsolePipeline::kOrders});
  REQUIRE(groups.size() == 1);
  expect["group"] = groups[0].group;
  expect["group_count"] = groups[0].count;
  expect["failure"] = groups[0].failure;
  expect["retried_consumer"] = ConsolePipeline::kOrders;
  REQUIRE(report.blocked_keys.size() == 1);
  const auto since =
      p.db.query(
              "SELECT to_char(blocked_since AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS\"Z\"') FROM {schema}.inbox_ordering_keys "
              "WHERE blocked_since IS NOT NULL")[0][0]
          .as<std::string>();
  expect["key"] = {{"key", report.blocked_keys[0].key},
                   {"scope", to_string(report.blocked_keys[0].scope)},
                   {"status", report.blocked_keys[0].head_status},
                   {"blocked_since", since}};
  expect["holder_pid"] = holder_pid;
  const std::string expect_path = BOXCAR_CONSOLE_BUILD_DIR "/expect-" + p.db.schema() + ".json";
  std::ofstream(expect_path) << expect.dump(2);

  // Retried now, the poison group completes.
  p.poison = false;
  // Each browser has its own HOME (both write their caches and crash reports there) and its
  // own screenshots, so the two ctest runs may run side by side.
  const auto browser =
      run_process(node_path(), {BOXCAR_CONSOLE_TEST_DIR "/browser_test.mjs"},
                  {"BROWSER=" + browser_under_test.name, "BROWSER_PATH=" + browser_under_test.executable,
                   "CONSOLE_URL=http://127.0.0.1:" + std::to_string(p.port()),
                   "ADMIN_TOKEN=" + std::string(ConsolePipeline::kAdminToken), "EXPECT=" + expect_path,
                   "SCREENSHOTS=" + screenshot_dir() + "/" + browser_under_test.name,
                   "HOME=" + std::string(BOXCAR_CONSOLE_BUILD_DIR) + "/home-" + browser_under_test.name},
                  240s);
  INFO(browser.output);
  CHECK(browser.exit_code == 0);
  std::remove(expect_path.c_str());

  // What the page did, in the database: the poison receipts completed, replayed by the
  // page's signed-in actor, and the action recorded.
  CHECK(p.count("consumer = 'orders.v1' AND status = 'COMPLETED'") ==
        ConsolePipeline::kGood + ConsolePipeline::kPoisoned);
  CHECK(p.count("message_id LIKE 'poison-%' AND last_replayed_by = 'console:alice'") == ConsolePipeline::kPoisoned);
  CHECK(p.db.scalar("SELECT count(*) FROM {schema}.operator_actions WHERE actor = 'console:alice' AND action = 'retry' "
                    "AND row_count = 3") == 1);
  snapshot.commit();
}

int main(int argc, char** argv) {
  Catch::Session session;
  std::string name = "chromium";
  session.cli(session.cli() | Catch::clara::Opt(name, "chromium|firefox")["--browser"]("the browser to drive"));
  if (const int invalid = session.applyCommandLine(argc, argv)) return invalid;
  for (const auto& browser : kBrowsers)
    if (browser.name == name) chosen_browser = &browser;
  if (chosen_browser == nullptr) {
    std::cerr << "console tests: --browser must be chromium or firefox, not " << name << "\n";
    return 2;
  }
  if (::access(chosen_browser->executable.c_str(), X_OK) != 0 || node_path().empty()) {
    std::cerr << "console tests: skipped: " << chosen_browser->executable
              << " or node is not installed (scripts/setup installs them)\n";
    return 77;
  }
  return session.run();
}
