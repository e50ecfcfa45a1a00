// The NOTIFY pacing of detail::AsyncNotifier: a key after a quiet spell goes out at once, a
// stream of keys is coalesced over an interval that doubles up to its longest, and every
// send reaches a listener; a writer's statement carries a wake-up (a ride) only when one
// is due, with the keys pending before it, which go back to the notifier when it did not
// commit them.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/detail/async_notifier.hpp"
#include "test_database.hpp"

using boxcar::testing::TestDatabase;
using namespace std::chrono_literals;

namespace {

struct Receiver final : pqxx::notification_receiver {
  using notification_receiver::notification_receiver;
  void operator()(const std::string& payload, int) override {
    if (payload == "orders.v1") ++received;
  }
  std::uint64_t received = 0;
};

}  // namespace

TEST_CASE("the notifier sends a key after a quiet spell at once and coalesces a stream over a growing interval") {
  TestDatabase db;
  const std::string channel = db.schema() + "_pacing";
  pqxx::connection listener(db.url());
  Receiver receiver(listener, channel);
  listener.get_notifs();
  boxcar::detail::AsyncNotifier notifier(db.url(), channel, 1ms, 8ms);

  // The first key: nothing was sent before, so it goes at once, at the shortest interval.
  notifier.notify("orders.v1");
  notifier.flush();
  CHECK(notifier.stats().sends == 1);
  CHECK(notifier.stats().interval == 1ms);

  // A stream: keys marked as fast as this thread can, far more than one per millisecond,
  // so the interval doubles at each send: 2, 4, then 8 ms, where it stays. (The deadline
  // only bounds a failing run.)
  std::uint64_t marks = 0;
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (notifier.stats().interval < 8ms && std::chrono::steady_clock::now() < deadline) {
    notifier.notify("orders.v1");
    ++marks;
  }
  const auto streamed = notifier.stats();
  CHECK(streamed.interval == 8ms);
  CHECK(streamed.sends < marks);  // coalesced: many marks per send

  // A quiet spell longer than the longest interval: the next key goes at once, and one
  // mark in 50 ms is no stream, so the interval starts over.
  notifier.flush();
  const auto before_quiet = notifier.stats().sends;
  std::this_thread::sleep_for(50ms);
  notifier.notify("orders.v1");
  notifier.flush();
  CHECK(notifier.stats().interval == 1ms);
  CHECK(notifier.stats().sends == before_quiet + 1);

  // Every send was a real notification (one per statement: its one key).
  for (int i = 0; i < 50 && receiver.received < notifier.stats().sends; ++i) listener.await_notification(0, 100000);
  CHECK(receiver.received == notifier.stats().sends);
}

TEST_CASE(
    "a writer's statement carries a wake-up only when one is due, and gives its keys back when it did not commit") {
  TestDatabase db;
  // Intervals long enough that the steps below always fall inside them.
  boxcar::detail::AsyncNotifier notifier(db.url(), db.schema() + "_rides", 100ms, 200ms);
  const std::vector<std::string> own{"orders.v1"};

  // Nothing was sent yet: the first writer carries its own key.
  auto first = notifier.begin_ride(own);
  REQUIRE(first);
  CHECK(first->payloads == own);
  // One wake-up in flight at a time: a second writer commits without one.
  CHECK_FALSE(notifier.begin_ride(own));
  notifier.end_ride(std::move(*first), boxcar::detail::AsyncNotifier::RideEnd::Carried);
  CHECK(notifier.stats().rides == 1);
  CHECK(notifier.stats().sends == 0);

  // Within the interval after a send no writer carries one: it marks its key after its
  // commit, and the notifier sends it once the interval is over.
  CHECK_FALSE(notifier.begin_ride(own));
  notifier.notify("audit.v1");
  notifier.flush();
  CHECK(notifier.stats().sends == 1);

  // After a quiet spell longer than the interval a writer carries one again.
  std::this_thread::sleep_for(250ms);
  auto second = notifier.begin_ride(own);
  REQUIRE(second);
  // Its statement failed (or its commit's outcome is unknown): its keys are pending
  // again, and the notifier sends them on its own.
  notifier.end_ride(std::move(*second), boxcar::detail::AsyncNotifier::RideEnd::Failed);
  notifier.flush();
  CHECK(notifier.stats().rides == 1);
  CHECK(notifier.stats().sends == 2);
}
