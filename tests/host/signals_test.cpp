// Process behaviour of the generic binary: a second signal ends a draining process at
// once, and the JSON log format writes one parseable object per line.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::TestDatabase;
using namespace std::chrono_literals;

namespace {

// Runs `boxcar ARGS... publisher` with stdout+stderr to `log`.
pid_t spawn_publisher(const TestDatabase& db, const std::string& log, std::vector<std::string> extra) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<std::string> args = {BOXCAR_CLI_PATH,
                                     "--database-url",
                                     db.url(),
                                     "--schema",
                                     db.schema(),
                                     "--http-listen",
                                     "",
                                     "--kafka",
                                     "bootstrap.servers=127.0.0.1:1"};
    for (auto& e : extra) args.push_back(e);
    args.emplace_back("publisher");
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(BOXCAR_CLI_PATH, argv.data());
    _exit(127);
  }
  return pid;
}

int wait_status(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

TEST_CASE("a second SIGTERM ends a process that is still draining at once") {
  TestDatabase db;
  {
    OutboxEmitter outbox(db.pool(), {.schema = db.schema(), .notify = false});
    Tx tx = db.pool()->begin();
    outbox.emit(tx, OutboxMessage{.event_type = "e", .schema_version = 1, .topic = "t", .payload = {{"n", 1}}},
                {.scope = Scope::global()});
    tx.commit();
  }
  // Kafka is unreachable, so the claimed batch waits out a 20 s delivery timeout on stop.
  const pid_t pid =
      spawn_publisher(db, "/tmp/boxcar-signal-test.log",
                      {"--set", "publisher.delivery_timeout_ms=20000", "--set", "publisher.lease_ms=60000"});
  const auto claimed = [&] {
    return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHING'");
  };
  const auto end = std::chrono::steady_clock::now() + 15s;
  while (claimed() == 0 && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(20ms);
  REQUIRE(claimed() == 1);
  ::kill(pid, SIGTERM);
  std::this_thread::sleep_for(300ms);
  const auto second = std::chrono::steady_clock::now();
  ::kill(pid, SIGTERM);
  const int status = wait_status(pid);
  CHECK(status == 128 + SIGTERM);
  CHECK(std::chrono::steady_clock::now() - second < 5s);
  // Nothing was marked published without a delivery report.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'") == 0);
}

TEST_CASE("the JSON log format writes one JSON object per line, with event fields as keys") {
  TestDatabase db;
  std::string event_id;
  {
    OutboxEmitter outbox(db.pool(), {.schema = db.schema(), .notify = false});
    Tx tx = db.pool()->begin();
    event_id = outbox
                   .emit(tx, OutboxMessage{.event_type = "e", .schema_version = 1, .topic = "t", .payload = {{"n", 1}}},
                         {.scope = Scope::global()})
                   .event_id;
    tx.commit();
  }
  const std::string log = "/tmp/boxcar-json-log-test.log";
  // Kafka is unreachable: after the 1 s delivery timeout the publisher logs the failure.
  const pid_t pid = spawn_publisher(
      db, log,
      {"--log-format", "json", "--set", "publisher.delivery_timeout_ms=1000", "--set", "publisher.lease_ms=30000"});
  std::this_thread::sleep_for(4500ms);
  ::kill(pid, SIGTERM);
  CHECK(wait_status(pid) == 0);
  FILE* file = std::fopen(log.c_str(), "r");
  REQUIRE(file);
  char line[8192];
  int parsed = 0;
  bool saw_start = false;
  bool saw_failure_fields = false;
  while (std::fgets(line, sizeof line, file)) {
    const std::string text = line;
    const auto json = nlohmann::json::parse(text);
    CHECK(json.contains("time"));
    CHECK(json.contains("level"));
    CHECK(json.contains("logger"));
    if (json.at("message").get<std::string>().find("runtime started") != std::string::npos) saw_start = true;
    if (json.value("outcome", "") == "failed" && json.value("first_event_id", "") == event_id)
      saw_failure_fields = true;
    ++parsed;
  }
  std::fclose(file);
  CHECK(parsed >= 2);
  CHECK(saw_start);
  CHECK(saw_failure_fields);
}
