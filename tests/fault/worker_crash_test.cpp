// A worker process killed with SIGKILL at random moments while draining 5,000 messages (and
// more, accepted whenever it drained them before enough kills landed), then restarted until
// drained: every message COMPLETED, exactly one application row each (the table has no
// unique constraint, so a double commit would show). Also with a batch handler
// (InboxBatchHandler), killed mostly inside handle_batch().
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "kill_campaign.hpp"
#include "test_database.hpp"
#include "worker_processes.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

void crash_and_recover(int batch_size, bool batch_handler = false) {
  constexpr int kFirstMessages = 5000;
  constexpr int kMoreMessages = 1000;
  testing::TestDatabase db;
  db.query("CREATE TABLE {schema}.app_rows (message_id text NOT NULL, attempt int NOT NULL)");
  std::int64_t accepted = 0;
  const auto accept_messages = [&](int count) {
    Inbox inbox(db.pool(4), {.schema = db.schema(), .consumers = {"crash.v1"}, .notify = false});
    std::vector<AcceptRequest> batch;
    for (int n = 0; n < count; ++n, ++accepted) {
      batch.push_back({.scope = Scope::global(),
                       .source = "crash-test",
                       .consumer = "crash.v1",
                       .message_id = "m-" + std::to_string(accepted),
                       .event_type = "crash.test",
                       .schema_version = 1,
                       .payload = {{"i", accepted}}});
      if (batch.size() == 500) {
        for (const auto& r : inbox.accept_many(batch)) REQUIRE(r.ok());
        batch.clear();
      }
    }
  };
  accept_messages(kFirstMessages);
  const auto completed = [&] {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'");
  };

  // Kill once a random amount of further progress was made, so every kill lands while
  // claims, handlers and commits are in flight.
  const int kills_mid_drain = run_kill_campaign({
      .spawn = [&] { return spawn_worker(db.url(), db.schema(), batch_size, batch_handler); },
      .finished = completed,
      .queued = [&] { return accepted; },
      .queue_more = [&] { accept_messages(kMoreMessages); },
      .step_min = 50,
      .step_max = 600,
      .give_up = 20s,
      .mid_drain_kills = 6,
  });
  // The faults really hit work in progress (not a finished or idle process).
  REQUIRE(kills_mid_drain >= 3);

  const pid_t pid = spawn_worker(db.url(), db.schema(), batch_size, batch_handler);
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (completed() < accepted && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(200ms);
  ::kill(pid, SIGTERM);
  const int status = wait_exit(pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  CHECK(completed() == accepted);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == accepted);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == accepted);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status <> 'COMPLETED'") == 0);
  // Kills left claims behind that lease recovery had to take over (as suspects).
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE suspect") > 0);
  // Only the completing attempt and crash strikes (a kill during a solo run) are charged:
  // claims lost with a process that ran several messages were given back.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE attempts <> 1 + crash_strikes") == 0);
}

}  // namespace

TEST_CASE("a worker process killed with SIGKILL while draining commits each message exactly once") {
  crash_and_recover(1);
}

TEST_CASE("a batched worker process killed with SIGKILL while draining commits each message exactly once") {
  crash_and_recover(16);
}

TEST_CASE(
    "a worker process killed with SIGKILL inside its batch handler commits each message and each app row exactly once") {
  crash_and_recover(16, true);
}
