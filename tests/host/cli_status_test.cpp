// `boxcar status --watch` and `boxcar status --check` through the binary: a watch redraws
// until SIGINT/SIGTERM and then exits 0 (on a terminal and into a pipe), and the check is
// a probe that exits 0 or 3. Liveness bounds only; no timing is asserted.
#include <catch2/catch.hpp>

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "boxcar/testing/eventually.hpp"
#include "child_process.hpp"
#include "test_database.hpp"

using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> environment(const TestDatabase& db) {
  return {"BOXCAR_DATABASE_URL=" + db.url(), "BOXCAR_SCHEMA=" + db.schema(), "BOXCAR_CONSUMERS=orders.v1",
          "BOXCAR_LOG_LEVEL=warn"};
}

std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

// The binary on a pseudo-terminal, as an operator runs it: isatty(stdout) is true.
class TerminalProcess {
 public:
  TerminalProcess(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    // Everything the child needs is built before the fork: after it, only exec.
    std::vector<std::string> argv_text = {BOXCAR_CLI_PATH};
    argv_text.insert(argv_text.end(), args.begin(), args.end());
    std::vector<std::string> env_text = env;
    env_text.push_back("PATH=/usr/bin:/bin");
    std::vector<char*> argv, envp;
    for (auto& a : argv_text) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_text) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_ = forkpty(&terminal_, nullptr, nullptr, nullptr);
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      execve(argv[0], argv.data(), envp.data());
      _exit(127);
    }
  }
  ~TerminalProcess() {
    if (!status_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(terminal_);
  }
  TerminalProcess(const TerminalProcess&) = delete;
  TerminalProcess& operator=(const TerminalProcess&) = delete;

  /// Reads what the terminal shows until `done` holds for it or `limit` has passed.
  template <typename Done>
  const std::string& read_until(Done done, std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!done(output_) && std::chrono::steady_clock::now() < end) {
      pollfd fd{.fd = terminal_, .events = POLLIN, .revents = 0};
      if (poll(&fd, 1, 100) <= 0) continue;
      char buffer[4096];
      const ssize_t n = read(terminal_, buffer, sizeof buffer);
      if (n <= 0) break;
      output_.append(buffer, static_cast<std::size_t>(n));
    }
    return output_;
  }
  void signal(int number) { kill(pid_, number); }
  /// The exit status, or nullopt when it still runs after `limit`.
  std::optional<int> wait(std::chrono::milliseconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!status_ && std::chrono::steady_clock::now() < end) {
      int status = 0;
      read_until([](const std::string&) { return false; }, 50ms);  // keep the terminal drained
      if (waitpid(pid_, &status, WNOHANG) == pid_)
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    return status_;
  }

 private:
  pid_t pid_ = -1;
  int terminal_ = -1;
  std::string output_;
  std::optional<int> status_;
};

}  // namespace

TEST_CASE("status --watch into a pipe prints snapshot after snapshot without escape codes and exits 0 on SIGTERM") {
  TestDatabase db;
  ChildProcess watch(BOXCAR_CLI_PATH, {"status", "--watch", "0.2"}, environment(db));
  const bool refreshed = eventually([&] { return occurrences(watch.output(), "Every 0.2s: boxcar status") >= 2; }, 20s);
  INFO(watch.output());
  REQUIRE(refreshed);
  watch.signal(SIGTERM);
  CHECK(watch.wait(10s) == 0);
  CHECK(occurrences(watch.output(), "INBOX") >= 2);
  CHECK(occurrences(watch.output(), "orders.v1") >= 2);
  CHECK(watch.output().find('\033') == std::string::npos);
}

TEST_CASE("status --watch on a terminal clears the screen before each snapshot and exits 0 on SIGINT") {
  TestDatabase db;
  TerminalProcess watch({"status", "--watch", "0.2"}, environment(db));
  const std::string& shown =
      watch.read_until([](const std::string& out) { return occurrences(out, "\033[H\033[2J") >= 2; }, 20s);
  INFO(shown);
  REQUIRE(occurrences(shown, "\033[H\033[2J") >= 2);
  CHECK(occurrences(shown, "Every 0.2s: boxcar status") >= 2);
  watch.signal(SIGINT);
  CHECK(watch.wait(10s) == 0);
}

TEST_CASE("status --watch --count stops after that many snapshots, and with --json each snapshot is one JSON line") {
  TestDatabase db;
  const auto table = run_process(BOXCAR_CLI_PATH, {"status", "--watch", "0.1", "--count", "2"}, environment(db), 30s);
  INFO(table.output);
  CHECK(table.exit_code == 0);
  CHECK(occurrences(table.output, "Every 0.1s: boxcar status") == 2);

  const auto json =
      run_process(BOXCAR_CLI_PATH, {"status", "--json", "--watch", "0.1", "--count", "3"}, environment(db), 30s);
  INFO(json.output);
  REQUIRE(json.exit_code == 0);
  std::istringstream lines(json.output);
  int documents = 0;
  for (std::string line; std::getline(lines, line); ++documents) {
    const auto document = nlohmann::json::parse(line);
    CHECK(document.at("format_version") == 1);
    CHECK(document.at("schema") == db.schema());
  }
  CHECK(documents == 3);
}

TEST_CASE("status --watch shows a database outage in place of the table and keeps watching") {
  const std::vector<std::string> unreachable = {"BOXCAR_DATABASE_URL=postgresql://127.0.0.1:1/none",
                                                "BOXCAR_LOG_LEVEL=warn"};
  const auto result = run_process(BOXCAR_CLI_PATH, {"status", "--watch", "0.1", "--count", "2"}, unreachable, 60s);
  INFO(result.output);
  CHECK(occurrences(result.output, "error: DATABASE_UNAVAILABLE") == 2);
  CHECK(result.exit_code == 3);  // --count: the exit code of the last snapshot
}

TEST_CASE("status --check exits 0 for a migrated schema and 3 when the database or the schema is not ready") {
  TestDatabase db;
  const auto ready = run_process(BOXCAR_CLI_PATH, {"status", "--check"}, environment(db), 30s);
  INFO(ready.output);
  CHECK(ready.exit_code == 0);
  CHECK(ready.output.find("ready: database answers") != std::string::npos);

  const auto unmigrated =
      run_process(BOXCAR_CLI_PATH, {"status", "--check", "--schema", db.schema() + "_never"}, environment(db), 30s);
  INFO(unmigrated.output);
  CHECK(unmigrated.exit_code == 3);
  CHECK(unmigrated.output.find("not ready") != std::string::npos);

  const auto unreachable =
      run_process(BOXCAR_CLI_PATH, {"status", "--check"}, {"BOXCAR_DATABASE_URL=postgresql://127.0.0.1:1/none"}, 30s);
  INFO(unreachable.output);
  CHECK(unreachable.exit_code == 3);
  CHECK(unreachable.output.find("not ready: database unreachable") != std::string::npos);
}
