// The wake-up listeners keep their LISTEN connection read while their owner is busy
// (core/src/wakeup_listener.cpp; docs/worker.md, "Wake-ups"): a listening backend whose
// client stops reading blocks sending to it once the socket buffers are full, and its
// queue position then holds the tail of the cluster's notification queue, which fills
// behind it until every NOTIFY in the cluster fails. Checked by reading
// pg_notification_queue_usage() and pg_stat_activity, never by timing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/detail/wakeup_listener.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/inbox/worker.hpp"
#include "notify_flood.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

// Floods `flood`'s channel in `rounds` rounds of equal size, `pause` apart, `multiple`
// times the socket buffers in all, and watches the channel's one listener throughout.
struct FloodOutcome {
  std::int64_t sent = 0;       // notifications, one queue page each
  std::int64_t most_held = 0;  // the most queue pages seen in use, read after each round
  int blocked_rounds = 0;      // rounds before which the listener was blocked or gone
  int first_blocked_round = -1;
};

FloodOutcome flood_and_watch(NotifyFlood& flood, int listener_pid, int multiple, int rounds,
                             std::chrono::milliseconds pause) {
  FloodOutcome outcome;
  const std::int64_t per_round = (NotifyFlood::notifications_for(multiple) + rounds - 1) / rounds;
  // The same backend still listens (a reconnect would also free the queue, and hide a
  // listener that stopped reading), and it is not blocked sending to its client: the state
  // in which a listener's position holds the queue's tail. A reading client lets it out
  // of that state within moments; one that does not read, never.
  const auto reading = [&] {
    const auto listener = flood.listener();
    return listener.pid == listener_pid && listener.wait_event != "ClientWrite";
  };
  for (int round = 0; round < rounds; ++round) {
    // Waited for generously until the first failure; after it, read once per round, so
    // the flood still reaches its full volume for the usage bound.
    const bool ok = outcome.blocked_rounds == 0 ? eventually(reading, 20s) : reading();
    if (!ok && outcome.blocked_rounds++ == 0) outcome.first_blocked_round = round;
    flood.send(per_round);
    outcome.most_held = std::max(outcome.most_held, flood.queue_pages());
    std::this_thread::sleep_for(pause);
  }
  outcome.sent = flood.sent();
  return outcome;
}

// The bound on the queue pages a flood of `sent` notifications may leave in use. A
// listener that stops reading lets through at most socket_buffer_bytes(), 1/multiple of
// the flood, and then holds everything after it: by the last round the queue holds at
// least (1 - 1/multiple) of the flood (7/8 or 3/4 here). One that keeps reading holds at
// most what was committed since it last caught up: the round just committed, a round it
// is still reading, and the 4-page granularity of the tail's advance
// (QUEUE_CLEANUP_DELAY). A quarter of the flood is far from both: it allows a reader a
// dozen rounds behind.
std::int64_t held_bound(std::int64_t sent) { return sent / 4; }

}  // namespace

TEST_CASE(
    "a worker kept busy for 30 s under a flood of notifications keeps reading its LISTEN connection: the "
    "cluster's notification queue stays near empty") {
  TestDatabase db;
  auto pool = db.pool(4);
  const std::string consumer = "flood.v1";
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {consumer}, .notify = false});
  std::vector<AcceptRequest> backlog;
  for (int i = 0; i < 2000; ++i) backlog.push_back(message(consumer, "m-" + std::to_string(i)));
  inbox.accept_many(backlog);

  // One handler thread that takes 50 ms a message: far more backlog than it can handle
  // during the flood, so its consumer's claims keep coming back full, the dispatcher never
  // goes idle, and it never waits on its wake-up listener, which is what the old listener
  // needed to read anything. (Short transactions, not one held open: a long one would
  // stall every concurrent test's CREATE INDEX CONCURRENTLY.)
  HandlerRegistration slow{
      .consumer = consumer,
      .supports = {{"thing.happened", 1}},
      .handler = handler([](const nlohmann::json&, HandlerContext&) { std::this_thread::sleep_for(50ms); })};
  Worker worker(pool, {.schema = db.schema(), .consumers = {consumer}, .concurrency = 1, .poll_interval = 200ms},
                {slow});
  NotifyFlood flood(db, Inbox::notify_channel(db.schema()));
  REQUIRE(flood.block_size() == 8192);  // one notification per page, see notify_flood.hpp
  worker.start();
  REQUIRE(eventually([&] { return flood.listener().pid != 0; }, 20s));
  const int listener_pid = flood.listener().pid;

  // Sixty rounds half a second apart: at least 30 s of flood, eight times the socket
  // buffers in all (288 MB where the kernel allows 32 MB + 4 MB).
  const auto outcome = flood_and_watch(flood, listener_pid, 8, 60, 500ms);
  INFO("sent " << outcome.sent << " pages, at most " << outcome.most_held << " held, bound " << held_bound(outcome.sent)
               << "; listener blocked before " << outcome.blocked_rounds << " rounds, the first "
               << outcome.first_blocked_round);
  CHECK(outcome.blocked_rounds == 0);
  CHECK(outcome.most_held <= held_bound(outcome.sent));
  // The worker was busy throughout: handling, and its backlog still unfinished.
  const auto completed = db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'");
  INFO("completed " << completed);
  CHECK(completed > 0);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING'") > 0);
  worker.stop();
}

TEST_CASE(
    "a wake-up listener whose owner never waits still keeps the notification queue empty, and its next wait "
    "reports the payloads it could not keep") {
  // The publisher's loop, like the worker's, waits on its listener only when idle: a
  // listener that no one waits on is the extreme of both.
  TestDatabase db;
  const std::string channel = "boxcar_flood_" + db.schema();
  detail::WakeupListener listener(db.url(), channel, logger("test"));
  REQUIRE(listener.ensure_listening());
  NotifyFlood flood(db, channel);
  REQUIRE(flood.block_size() == 8192);
  REQUIRE(eventually([&] { return flood.listener().pid != 0; }, 10s));

  const auto outcome = flood_and_watch(flood, flood.listener().pid, 4, 20, 100ms);
  INFO("sent " << outcome.sent << " pages, at most " << outcome.most_held << " held, bound " << held_bound(outcome.sent)
               << "; listener blocked before " << outcome.blocked_rounds << " rounds, the first "
               << outcome.first_blocked_round);
  CHECK(outcome.blocked_rounds == 0);
  CHECK(outcome.most_held <= held_bound(outcome.sent));

  const auto never = [] { return false; };
  // Far more distinct payloads arrived than it keeps: the first wait says some are gone.
  CHECK(listener.wait_until(std::chrono::steady_clock::now() + 5s, never).may_have_missed);
  // After that, a wanted payload ends a wait and an unwanted one is dropped.
  pqxx::connection sender = db.connect();
  pqxx::nontransaction(sender).exec_params(
      "SELECT pg_catalog.pg_notify($1, 'other'), pg_catalog.pg_notify($1, 'wanted')", channel);
  const auto woke = listener.wait_until(std::chrono::steady_clock::now() + 10s, never,
                                        [](const std::string& payload) { return payload == "wanted"; });
  CHECK(woke.payloads == std::set<std::string>{"wanted"});
  CHECK_FALSE(woke.may_have_missed);
}

TEST_CASE("a lost wake-up connection is reported once by the next wait, and ensure_listening opens a new LISTEN") {
  TestDatabase db;
  const std::string channel = "boxcar_lost_" + db.schema();
  detail::WakeupListener listener(db.url(), channel, logger("test"));
  REQUIRE(listener.ensure_listening());
  CHECK_FALSE(listener.ensure_listening());  // already listening
  NotifyFlood flood(db, channel);
  REQUIRE(eventually([&] { return flood.listener().pid != 0; }, 10s));
  pqxx::connection admin = db.connect();
  pqxx::nontransaction(admin).exec_params("SELECT pg_catalog.pg_terminate_backend($1)", flood.listener().pid);

  const auto never = [] { return false; };
  CHECK(listener.wait_until(std::chrono::steady_clock::now() + 10s, never).may_have_missed);
  CHECK(listener.ensure_listening());  // a new LISTEN: the caller looks at everything once
  CHECK_FALSE(listener.ensure_listening());
  pqxx::nontransaction(admin).exec_params("SELECT pg_catalog.pg_notify($1, 'after')", channel);
  const auto woke = listener.wait_until(std::chrono::steady_clock::now() + 10s, never);
  CHECK(woke.payloads == std::set<std::string>{"after"});
  CHECK_FALSE(woke.may_have_missed);
}
