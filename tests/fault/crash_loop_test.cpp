// A poison message that aborts the worker process on every attempt, among 40 normal
// ones, with the process restarted after each crash until everything settled: only the
// poison ends DEAD for crash looping. The messages that were claimed or in flight beside
// it when the process died go through the suspect lane without being charged, and each
// commits exactly once (the app table has no unique constraint, so a double commit shows).
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "test_database.hpp"
#include "worker_processes.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kNormal = 40;
constexpr int kMaxAttempts = 3;

AcceptRequest crash_message(const std::string& id, nlohmann::json payload) {
  return {.scope = Scope::global(),
          .source = "crash-loop-test",
          .consumer = "crash.v1",
          .message_id = id,
          .event_type = "crash.test",
          .schema_version = 1,
          .payload = std::move(payload)};
}

void poison_among_normal_messages(int batch_size, int processes, bool batch_handler = false) {
  testing::TestDatabase db;
  db.query("CREATE TABLE {schema}.app_rows (message_id text NOT NULL, attempt int NOT NULL)");
  {
    Inbox inbox(db.pool(2), {.schema = db.schema(), .consumers = {"crash.v1"}, .notify = false});
    // Accepted first, so it is due first: the first claim takes it together with normal
    // messages, which are then queued or in flight when it kills the process.
    REQUIRE(inbox.accept(crash_message("poison", {{"poison", true}})).kind == Receipt::Kind::Accepted);
    std::vector<AcceptRequest> normal;
    for (int i = 0; i < kNormal; ++i) normal.push_back(crash_message("m-" + std::to_string(i), {{"i", i}}));
    for (const auto& r : inbox.accept_many(normal)) REQUIRE(r.ok());
  }
  const auto settled = [&] {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status IN ('COMPLETED', 'DEAD')");
  };

  // `processes` workers at a time; each one that crashes is restarted.
  int crashes = 0;
  const auto give_up = std::chrono::steady_clock::now() + 150s;
  std::vector<pid_t> running;
  while (settled() < kNormal + 1 && std::chrono::steady_clock::now() < give_up) {
    while (static_cast<int>(running.size()) < processes)
      running.push_back(spawn_worker(db.url(), db.schema(), batch_size, batch_handler, kMaxAttempts));
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      if (waitpid(*it, &status, WNOHANG) != *it) {
        ++it;
        continue;
      }
      REQUIRE(WIFSIGNALED(status));
      REQUIRE(WTERMSIG(status) == SIGABRT);  // only the poison kills it
      ++crashes;
      it = running.erase(it);
    }
    std::this_thread::sleep_for(50ms);
  }
  for (const pid_t pid : running) {
    ::kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    // A worker may have been killed by the poison just before the last message settled.
    CHECK(((WIFEXITED(status) && WEXITSTATUS(status) == 0) || (WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT)));
    if (WIFSIGNALED(status)) ++crashes;
  }
  REQUIRE(settled() == kNormal + 1);

  // The poison crashed a process once beside other messages, then max_attempts times
  // alone: three crash strikes, and DEAD. (Alone in its process: with two processes, the
  // other one kept working meanwhile.)
  CHECK(crashes == kMaxAttempts + 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 1);
  const auto poison = db.query(
      "SELECT status, dead_reason, crash_strikes, attempts, last_error_type "
      "FROM {schema}.inbox_receipts WHERE message_id = 'poison'")[0];
  CHECK(poison["status"].as<std::string>() == "DEAD");
  CHECK(poison["dead_reason"].as<std::string>() == "LEASE_EXPIRED_EXHAUSTED");
  CHECK(poison["crash_strikes"].as<int>() == kMaxAttempts);
  CHECK(poison["attempts"].as<int>() == kMaxAttempts);
  CHECK(poison["last_error_type"].as<std::string>() == "LeaseExpired");

  // Every normal message completed exactly once, on the one attempt it was charged.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == kNormal);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == kNormal);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == kNormal);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts "
                  "WHERE message_id <> 'poison' AND (attempts <> 1 OR crash_strikes <> 0)") == 0);
  // The scenario really hit bystanders: messages claimed beside the poison when it killed
  // the process were released as suspects (and then completed alone).
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id <> 'poison' AND suspect") > 0);
}

}  // namespace

TEST_CASE("a message that aborts the worker process goes DEAD alone, and the messages beside it complete once") {
  poison_among_normal_messages(1, 1);
}

TEST_CASE("in batch mode, a message that aborts the worker process goes DEAD alone, the others complete once") {
  poison_among_normal_messages(4, 1);
}

TEST_CASE("with two worker processes, only the message that aborts them goes DEAD and the others complete once") {
  poison_among_normal_messages(1, 2);
}

TEST_CASE("with a batch handler, a message that aborts the worker process goes DEAD alone, the others complete once") {
  poison_among_normal_messages(8, 1, true);
}
