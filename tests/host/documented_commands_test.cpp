// Every command line the documentation shows is run here, against the test PostgreSQL.
// The lines are read from README.md, docs/*.md and examples/*/README.md (inline code and
// code-block lines that start with `boxcar` or `my-service`), so a line added to the docs
// is tested without touching this file; a line that cannot run as written (placeholders,
// "...") needs a stand-in below.
#include <catch2/catch.hpp>

#include <signal.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "boxcar/ops/operator.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "child_process.hpp"
#include "http_get.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "boxcar/testing/roles.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

// Documented lines that cannot run as written, and what runs in their place. {url},
// {schema}, {id} (a DEAD receipt) and {group} (its failure group) are filled in.
const std::map<std::string, std::vector<std::string>> kStandIns = {
    {"boxcar dead ...", {"boxcar dead list"}},
    {"boxcar dead show ID", {"boxcar dead show {id}"}},
    // Headings name these; without a filter they are refused (DEAD_FILTER_REQUIRED, exit 1).
    {"boxcar dead retry", {"boxcar dead retry --id {id} --dry-run"}},
    {"boxcar dead discard", {"boxcar dead discard --id {id} --dry-run"}},
    {"boxcar dead retry ...", {"boxcar dead retry --error timeout --dry-run", "boxcar dead retry --id {id}"}},
    {"boxcar dead discard ...", {"boxcar dead discard --older-than 0s --dry-run", "boxcar dead discard --id {id}"}},
    {"boxcar dead retry --id N", {"boxcar dead retry --id {id} --dry-run"}},
    {"boxcar dead discard --id N", {"boxcar dead discard --id {id} --dry-run"}},
    // This deployment has no blocked key (tests/pg/ordering_test.cpp unblocks one): with
    // nothing to release the command exits 1 by design.
    {"boxcar dead unblock KEY", {"boxcar dead unblock --help"}},
    {"boxcar dead unblock", {"boxcar dead unblock --help"}},
    {"boxcar dead unblock KEY [--consumer C] [--scope SCOPE | --every-scope]", {"boxcar dead unblock --help"}},
    {"boxcar dead unblock KEY --scope SCOPE [--consumer C]", {"boxcar dead unblock --help"}},
    {"boxcar dead retry --failure-group 3f2a9c01b7de --dry-run",
     {"boxcar dead retry --failure-group {group} --dry-run"}},
    {"boxcar dead retry --failure-group 3f2a9c01b7de --actor alice",
     {"boxcar dead retry --failure-group {group} --actor alice"}},
    {"boxcar dead discard --id 42 --actor alice", {"boxcar dead discard --id {id} --actor alice"}},
    {"boxcar status --database-url postgresql://ops@db.internal/orders --schema boxcar",
     {"boxcar status --database-url {url} --schema {schema}"}},
    {"boxcar --schema s status", {"boxcar --schema {schema} status"}},
    // A watch runs until Ctrl-C: --count ends it (tests/host/cli_status_test.cpp signals one).
    {"boxcar status --watch 5", {"boxcar status --watch 0.1 --count 2"}},
    {"boxcar status --watch [SECONDS]", {"boxcar status --watch --count 1"}},
    {"boxcar status --schema s", {"boxcar status --schema {schema}"}},
    // Roles are cluster-wide: a prefix of the test's own, dropped with the Deployment.
    {"boxcar migrate --roles", {"boxcar migrate --roles --role-prefix {schema}_"}},
};

// The commands that run until a signal.
const std::set<std::string> kRoles = {"worker", "publisher", "all", "ingress"};

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string trim(std::string text) {
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\\");
  return text.substr(first, last - first + 1);
}

bool is_command(const std::string& text) { return text.starts_with("boxcar ") || text.starts_with("my-service "); }

// Command lines in one Markdown file: inline code spans, and code-block lines whose first
// word after any NAME=VALUE environment assignments is the program (trailing `# ...`
// comments and `\` continuations dropped).
std::vector<std::string> command_lines(const std::string& markdown) {
  std::vector<std::string> found;
  const std::regex span("`([^`\n]+)`");
  for (auto m = std::sregex_iterator(markdown.begin(), markdown.end(), span); m != std::sregex_iterator(); ++m)
    if (is_command((*m)[1].str())) found.push_back(trim((*m)[1].str()));
  std::istringstream lines(markdown);
  bool in_block = false;
  for (std::string line; std::getline(lines, line);) {
    if (trim(line).starts_with("```")) {
      in_block = !in_block;
      continue;
    }
    if (!in_block) continue;
    std::string rest = trim(line);
    while (std::regex_search(rest, std::regex("^[A-Z_][A-Z0-9_]*=\\S*\\s+")))
      rest = rest.substr(rest.find_first_of(" \t") + 1);
    if (!is_command(rest)) continue;
    if (const auto comment = rest.find(" #"); comment != std::string::npos) rest = rest.substr(0, comment);
    found.push_back(trim(rest));
  }
  return found;
}

// Every documented command line, with the files that show it.
std::map<std::string, std::set<std::string>> documented_command_lines() {
  namespace fs = std::filesystem;
  const fs::path root = BOXCAR_SOURCE_DIR;
  std::vector<fs::path> files = {root / "README.md"};
  for (const auto& entry : fs::directory_iterator(root / "docs"))
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  for (const auto& entry : fs::directory_iterator(root / "examples"))
    if (fs::exists(entry.path() / "README.md")) files.push_back(entry.path() / "README.md");
  std::map<std::string, std::set<std::string>> lines;
  for (const auto& file : files)
    for (const auto& line : command_lines(read_file(file))) lines[line].insert(fs::relative(file, root).string());
  return lines;
}

std::string fill(std::string text, const std::map<std::string, std::string>& values) {
  for (const auto& [name, value] : values)
    for (auto at = text.find(name); at != std::string::npos; at = text.find(name, at + value.size()))
      text.replace(at, name.size(), value);
  return text;
}

// A fresh schema with one DEAD receipt, and the environment a deployment would give.
struct Deployment {
  TestDatabase db;
  std::int64_t dead_id = 0;
  std::string group;
  int http_port = free_loopback_port();

  explicit Deployment(const MockKafka& kafka) : kafka_servers_(kafka.bootstrap_servers()) {
    db.query("CREATE TABLE {schema}.app_rows (message_id text NOT NULL, attempt int NOT NULL)");
    Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
    dead_id = inbox
                  .accept({.scope = Scope::tenant("t1"),
                           .source = "docs",
                           .consumer = "orders.v1",
                           .message_id = "d-1",
                           .event_type = "order.created",
                           .schema_version = 1,
                           .payload = {{"orderId", "o-1"}}})
                  .id;
    db.query(
        "UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', attempts = 3, "
        "finished_attempts = 3, last_error_type = 'std::runtime_error', last_error = 'order 17 failed: timeout' "
        "WHERE id = " +
        std::to_string(dead_id));
    group = dead_groups(*db.pool(), db.schema(), RecordKind::Inbox).at(0).group;
  }

  std::vector<std::string> environment() const {
    return {"BOXCAR_DATABASE_URL=" + db.url(),
            "BOXCAR_SCHEMA=" + db.schema(),
            "BOXCAR_CONSUMERS=orders.v1",
            "BOXCAR_LOG_LEVEL=warn",
            "BOXCAR_KAFKA_BOOTSTRAP_SERVERS=" + kafka_servers_,
            "BOXCAR_HTTP_LISTEN=127.0.0.1:" + std::to_string(http_port),
            "USER=docs"};
  }
  ~Deployment() {
    try {
      drop_roles(db.url(), {.schema = db.schema(), .role_prefix = db.schema() + "_"});
    } catch (const std::exception& e) {
      WARN("dropping the documented roles failed: " << e.what());
    }
  }
  Deployment(const Deployment&) = delete;
  Deployment& operator=(const Deployment&) = delete;

  std::map<std::string, std::string> placeholders() const {
    return {{"{url}", db.url()}, {"{schema}", db.schema()}, {"{id}", std::to_string(dead_id)}, {"{group}", group}};
  }

 private:
  std::string kafka_servers_;
};

bool serving(int port) {
  try {
    return http_get(port, "/healthz").status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

// Runs one command line; a role must come up (/healthz answers) and stop cleanly on
// SIGTERM, every other command must exit 0.
void run_documented(const std::string& line, const MockKafka& kafka) {
  Deployment deployment(kafka);
  const std::vector<std::string> words = split_words(fill(line, deployment.placeholders()));
  REQUIRE(words.size() >= 2);
  const std::string program = words[0] == "boxcar" ? BOXCAR_CLI_PATH : BOXCAR_TEST_APP_PATH;
  const std::vector<std::string> args(words.begin() + 1, words.end());
  const bool help = std::find(args.begin(), args.end(), "--help") != args.end();
  if (kRoles.contains(args[0]) && !help) {
    ChildProcess role(program, args, deployment.environment());
    const auto end = std::chrono::steady_clock::now() + 30s;
    while (!serving(deployment.http_port) && !role.wait(0ms) && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(50ms);
    INFO(role.output());
    CHECK(serving(deployment.http_port));
    role.signal(SIGTERM);
    CHECK(role.wait(30s) == 0);
  } else {
    const auto result = run_process(program, args, deployment.environment(), 60s);
    INFO(result.output);
    CHECK(result.exit_code == 0);
  }
}

}  // namespace

TEST_CASE("the documentation's command lines are found, and every stand-in replaces a documented line") {
  const auto documented = documented_command_lines();
  // Lines the docs are known to show, so a broken scanner cannot pass by finding nothing.
  CHECK(documented.contains("boxcar publisher --topic order.projected=orders-v2 --batch-size 1000"));
  CHECK(documented.contains("boxcar status"));
  CHECK(documented.contains("my-service worker"));
  for (const auto& [line, runs] : kStandIns) {
    INFO("stand-in for a line no document shows any more: " << line);
    CHECK(documented.contains(line));
  }
}

TEST_CASE("every command line the documentation shows runs against a real database") {
  MockKafka kafka;
  kafka.create_topic("orders-v2", 2);
  for (const auto& [line, files] : documented_command_lines()) {
    const auto stand_in = kStandIns.find(line);
    for (const auto& run : stand_in == kStandIns.end() ? std::vector<std::string>{line} : stand_in->second) {
      std::string shown_in;
      for (const auto& file : files) shown_in += " " + file;
      INFO(line << " (in" << shown_in << ") runs as: " << run);
      run_documented(run, kafka);
    }
  }
}
