// Per-key ordering across worker processes (docs/ordering.md): three worker processes
// (one-message, batched and batch-handler mode) drain 50 keys x 200 messages of an
// ordered consumer, one of them killed with SIGKILL mid-drain and restarted. Every key's
// application rows are written in accept order, each message exactly once.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "test_database.hpp"
#include "worker_processes.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kKeys = 50;
constexpr int kPerKey = 200;

}  // namespace

TEST_CASE("three worker processes, one killed mid-drain, write every key's rows in accept order exactly once") {
  testing::TestDatabase db;
  // row_id: the order the rows were committed in (no unique constraint on message_id, so
  // a double commit would show).
  db.query(
      "CREATE TABLE {schema}.app_rows (row_id bigserial PRIMARY KEY, message_id text NOT NULL, attempt int NOT "
      "NULL)");
  {
    Inbox inbox(db.pool(4), {.schema = db.schema(),
                             .consumers = {"crash.v1"},
                             .ordering = {{"crash.v1", {.key = OrderingKey::payload_pointer("/key")}}},
                             .notify = false});
    std::vector<AcceptRequest> batch;
    for (int seq = 0; seq < kPerKey; ++seq)
      for (int k = 0; k < kKeys; ++k) {
        const std::string key = "k" + std::to_string(k);
        batch.push_back({.scope = Scope::global(),
                         .source = "ordered-test",
                         .consumer = "crash.v1",
                         .message_id = key + "-" + std::to_string(seq),
                         .event_type = "crash.test",
                         .schema_version = 1,
                         .payload = {{"key", key}, {"seq", seq}}});
        if (batch.size() == 500) {
          for (const auto& r : inbox.accept_many(batch)) REQUIRE(r.ok());
          batch.clear();
        }
      }
  }
  REQUIRE(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'WAITING'") == kKeys * (kPerKey - 1));
  const auto completed = [&] {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'");
  };

  std::array<pid_t, 3> workers{spawn_worker(db.url(), db.schema(), 1, false),
                               spawn_worker(db.url(), db.schema(), 8, false),
                               spawn_worker(db.url(), db.schema(), 8, true)};
  const auto until = [&](long long target, std::chrono::seconds limit) {
    const auto give_up = std::chrono::steady_clock::now() + limit;
    while (completed() < target && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(20ms);
  };
  until(kKeys * kPerKey / 3, 120s);
  REQUIRE(WIFSIGNALED(stop_worker(workers[1], SIGKILL)));
  const auto at_kill = completed();
  CHECK(at_kill < kKeys * kPerKey);
  workers[1] = spawn_worker(db.url(), db.schema(), 8, false);
  until(kKeys * kPerKey, 240s);
  for (const pid_t pid : workers) {
    const int status = stop_worker(pid, SIGTERM);
    CHECK(WIFEXITED(status));
  }

  CHECK(completed() == kKeys * kPerKey);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == kKeys * kPerKey);
  CHECK(db.scalar("SELECT count(DISTINCT message_id) FROM {schema}.app_rows") == kKeys * kPerKey);
  // Per key, each row's sequence number is one more than the row committed before it.
  CHECK(db.scalar(R"sql(
      SELECT count(*)
      FROM (SELECT split_part(message_id, '-', 2)::int AS seq,
                   lag(split_part(message_id, '-', 2)::int)
                       OVER (PARTITION BY split_part(message_id, '-', 1) ORDER BY row_id) AS previous
            FROM {schema}.app_rows) AS rows
      WHERE seq <> coalesce(previous + 1, 0))sql") == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_ordering_keys") == 0);
}
