// The NOTIFY pacing of detail::AsyncNotifier: a key after a quiet spell goes out at once, a
// stream of keys is coalesced over an interval that doubles up to its longest, and every
// send reaches a listener; a writer's statement carries a wake-up (a ride) only when one
// is due, with the keys pending before it, which go back to the notifier when it did not
// commit them; in a stream, a key that missed a ride waits for the next writer's ride
// rather than a transaction of the notifier's own.
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

TEST_CASE("in a stream, a key that missed a ride is left to the next writer for the writers' grace") {
  TestDatabase db;
  boxcar::detail::AsyncNotifier notifier(db.url(), db.schema() + "_stream_grace", 100ms, 1s);
  const std::vector<std::string> own{"orders.v1"};

  // A stream: keys marked as fast as this thread can until the interval is at its longest,
  // then a ride as soon as one is due, its window full of marks, so the interval stays there.
  std::optional<boxcar::detail::AsyncNotifier::Ride> ride;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (!ride && std::chrono::steady_clock::now() < deadline) {
    notifier.notify("orders.v1");
    if (notifier.stats().interval == 1s) ride = notifier.begin_ride(own);
  }
  REQUIRE(ride);
  notifier.end_ride(std::move(*ride), boxcar::detail::AsyncNotifier::RideEnd::Carried);
  REQUIRE(notifier.stats().interval == 1s);
  const auto sends = notifier.stats().sends;

  // A writer that missed the ride marks its key. The thread leaves it to the writers until
  // the interval and the grace are over (2 s after the ride): a writer due after the
  // interval carries it, and the thread sends nothing of its own.
  notifier.notify("audit.v1");
  std::this_thread::sleep_for(1200ms);
  CHECK(notifier.stats().sends == sends);
  auto next = notifier.begin_ride(own);
  REQUIRE(next);
  CHECK(next->taken == std::vector<std::string>{"audit.v1"});
  notifier.end_ride(std::move(*next), boxcar::detail::AsyncNotifier::RideEnd::Carried);
  notifier.flush();
  CHECK(notifier.stats().sends == sends);
}
