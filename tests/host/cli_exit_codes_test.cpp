// The exit codes of docs/operator.md ("Exit codes") through the `boxcar` binary: 0 ok,
// 1 failure, 2 usage, 3 not ready or unhealthy, each for the cases the table names.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "boxcar/inbox/inbox.hpp"
#include "child_process.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

struct Case {
  std::string arguments;
  int exit_code;
};

std::vector<std::string> environment(const std::string& url, const std::string& schema) {
  return {"BOXCAR_DATABASE_URL=" + url, "BOXCAR_SCHEMA=" + schema, "BOXCAR_CONSUMERS=orders.v1",
          "BOXCAR_LOG_LEVEL=warn", "BOXCAR_HTTP_LISTEN="};
}

void check_cases(const std::vector<Case>& cases, const std::vector<std::string>& env) {
  for (const auto& c : cases) {
    const auto result = run_process(BOXCAR_CLI_PATH, split_words(c.arguments), env, 60s);
    INFO("boxcar " << c.arguments << "\n" << result.output);
    CHECK(result.exit_code == c.exit_code);
  }
}

}  // namespace

TEST_CASE("commands that do what was asked exit 0, and commands that run and fail exit 1") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  check_cases(
      {
          {"status", 0},
          {"status --json", 0},
          {"status --check", 0},
          {"status --watch 0.1 --count 1", 0},
          {"dead list --json", 0},
          {"purge --dry-run", 0},
          {"status --help", 0},
          {"dead retry", 1},                            // DEAD_FILTER_REQUIRED
          {"dead show 999999", 1},                      // DEAD_RECORD_NOT_FOUND
          {"dead unblock no-such-key", 1},              // nothing released
          {"dead list --kind outbox --consumer c", 1},  // DEAD_FILTER_INVALID
      },
      environment(db.url(), db.schema()));
  // A statement that fails on a reachable database (the schema has no tables) is a
  // failure, not "not ready".
  check_cases({{"dead list", 1}}, environment(db.url(), db.schema() + "_missing"));
}

TEST_CASE("a wrong command line or configuration exits 2") {
  // The database is unreachable: a usage error must be found before it is needed.
  check_cases(
      {
          {"status --bogus", 2},
          {"frob", 2},
          {"status --watch x", 2},
          {"dead unblock k --scope tenant:", 2},  // a scope is global or tenant:ID
          {"status --watch 0", 2},
          {"status --count 2", 2},  // --count needs --watch
          {"status --check --json", 2},
          {"status --check --watch", 2},
          {"status --set worker.concurrency=many", 2},  // CONFIG_INVALID
          {"status --schema bad-name!", 2},
          {"worker", 2},  // this binary has no handlers: a configuration error
      },
      environment("postgresql://127.0.0.1:1/none", "boxcar"));
}

TEST_CASE("an unreachable database or a schema that is not ready exits 3, for every command") {
  check_cases(
      {
          {"status", 3},
          {"status --json", 3},
          {"status --check", 3},
          {"dead list", 3},
          {"dead retry --all --dry-run", 3},
          {"purge --dry-run", 3},
          {"migrate", 3},
      },
      environment("postgresql://127.0.0.1:1/none", "boxcar"));
  TestDatabase db;
  check_cases({{"status --check", 3}}, environment(db.url(), db.schema() + "_never_migrated"));
}

TEST_CASE("the exit code table of docs/operator.md lists exactly the codes 0 to 3") {
  std::ifstream in(std::filesystem::path(BOXCAR_SOURCE_DIR) / "docs" / "operator.md");
  std::set<int> codes;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#")) inside = line == "## Exit codes";
    std::smatch m;
    if (inside && std::regex_search(line, m, std::regex(R"(^\| ([0-9]+) \|)"))) codes.insert(std::stoi(m[1].str()));
  }
  CHECK(codes == std::set<int>{0, 1, 2, 3});
}
