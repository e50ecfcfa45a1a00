// Wake-ups per consumer: a worker claims for a consumer it owns when that consumer is
// notified (or at its poll), never because another consumer of the schema was.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/inbox/worker.hpp"
#include "exposition.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

std::vector<std::string> consumer_names(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) {
    char name[16];
    std::snprintf(name, sizeof name, "c%02d.v1", i);
    names.emplace_back(name);
  }
  return names;
}

// Counts the notifications of a channel on a connection of its own: the test's proof
// that the foreign notifications really arrived.
struct NotificationCounter final : pqxx::notification_receiver {
  using notification_receiver::notification_receiver;
  void operator()(const std::string&, int) override { ++count; }
  int count = 0;
};

struct Setup {
  TestDatabase db;
  std::vector<std::string> consumers = consumer_names(20);
  std::shared_ptr<ConnectionPool> pool;
  std::string app_table;
  Setup() : pool(db.pool(8)), app_table(db.qualified("{schema}.app_rows")) { create_app_table(db); }

  Inbox inbox(bool notify) const {
    return Inbox(pool, {.schema = db.schema(), .consumers = consumers, .notify = notify});
  }
  // Owns only the first consumer, polling every `poll`.
  WorkerOptions options(std::chrono::milliseconds poll) const {
    return {.schema = db.schema(),
            .consumers = consumers,
            .owned_consumers = {consumers[0]},
            .lease = 5s,
            .handler_timeout = 2s,
            .poll_interval = poll};
  }
  HandlerRegistration writer() const { return app_row_writer(consumers[0], app_table); }
  std::string status_of(const std::string& message_id) const {
    return db.query("SELECT status FROM {schema}.inbox_receipts WHERE message_id = '" + message_id + "'")[0][0]
        .as<std::string>();
  }
};

}  // namespace

TEST_CASE("a worker owning 1 of 20 consumers does not claim on the other 19's notifications") {
  Setup s;
  Inbox inbox = s.inbox(true);
  Worker worker(s.pool, s.options(10s), {s.writer()});
  pqxx::connection listener = s.db.connect();
  NotificationCounter foreign(listener, Inbox::notify_channel(s.db.schema()));
  worker.start();
  // The first round (one claim statement) found nothing; the next poll is 10 s away.
  REQUIRE(eventually([&] { return worker.stats().claim_statements >= 1; }, 5s));
  std::this_thread::sleep_for(200ms);
  const auto started = std::chrono::steady_clock::now();
  const auto before = worker.stats().claim_statements;

  // A steady stream for the 19 others, one accept at a time, so each is its own NOTIFY.
  int accepted = 0;
  for (int round = 0; round < 8; ++round)
    for (std::size_t c = 1; c < s.consumers.size(); ++c) {
      inbox.accept(message(s.consumers[c], "m-" + std::to_string(round) + "-" + std::to_string(c)));
      ++accepted;
      std::this_thread::sleep_for(2ms);
    }
  // Let the last notifications arrive at both listeners.
  const auto deadline = std::chrono::steady_clock::now() + 1s;
  while (std::chrono::steady_clock::now() < deadline) listener.await_notification(0, 100'000);
  const auto after = worker.stats().claim_statements;
  const auto elapsed = std::chrono::steady_clock::now() - started;

  INFO("foreign notifications " << foreign.count << ", accepted " << accepted << ", claim statements " << before
                                << " -> " << after);
  REQUIRE(elapsed < 10s);  // no poll fell inside the window
  REQUIRE(foreign.count >= 100);
  // Within the window the worker's poll cadence allows no claim: at most one, for a
  // recovery tick racing the window's start.
  CHECK(after - before <= 1);
  CHECK(worker.stats().claimed == 0);
  worker.stop();
}

TEST_CASE("a notification naming an owned consumer still wakes the worker well before its poll") {
  Setup s;
  Inbox inbox = s.inbox(true);
  Worker worker(s.pool, s.options(20s), {s.writer()});
  worker.start();
  REQUIRE(eventually([&] { return worker.stats().claim_statements >= 1; }, 5s));
  std::this_thread::sleep_for(200ms);                  // idle now
  inbox.accept(message(s.consumers[5], "foreign-1"));  // ignored
  inbox.accept(message(s.consumers[0], "own-1"));
  CHECK(eventually([&] { return s.status_of("own-1") == "COMPLETED"; }, 5s));
  worker.stop();
}

TEST_CASE("an empty payload, as dead retry sends, wakes the worker for every consumer it owns") {
  Setup s;
  Worker worker(s.pool, s.options(20s), {s.writer()});
  worker.start();
  REQUIRE(eventually([&] { return worker.stats().claim_statements >= 1; }, 5s));
  std::this_thread::sleep_for(200ms);  // idle now
  Inbox silent = s.inbox(false);       // accepts without notifying, like a retried DEAD record
  silent.accept(message(s.consumers[0], "own-1"));
  std::this_thread::sleep_for(300ms);
  REQUIRE(s.status_of("own-1") == "PENDING");  // nothing woke it yet
  pqxx::connection c = s.db.connect();
  pqxx::nontransaction(c).exec_params("SELECT pg_catalog.pg_notify($1, '')", Inbox::notify_channel(s.db.schema()));
  CHECK(eventually([&] { return s.status_of("own-1") == "COMPLETED"; }, 5s));
  worker.stop();
}

TEST_CASE("boxcar_worker_claims_total counts the claim statements of each consumer") {
  Setup s;
  auto metrics = std::make_shared<Metrics>();
  auto options = s.options(10s);
  options.metrics = metrics;
  Worker worker(s.pool, options, {s.writer()});
  worker.start();
  REQUIRE(eventually([&] { return worker.stats().claim_statements >= 1; }, 5s));
  worker.stop();
  const auto statements = worker.stats().claim_statements;
  CHECK(metric_value(metrics->serialize(), "boxcar_worker_claims_total", {{"consumer", s.consumers[0]}}) ==
        static_cast<double>(statements));
}
