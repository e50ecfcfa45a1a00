// The deadline watchdog behind handler cut-offs (inbox/src/handler_run.hpp): an action that
// throws (a query cancel while the database is unreachable) must not end the process, and
// the watchdog goes on serving the next deadline.
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>
#include <thread>

#include "boxcar/inbox/detail/deadline_watchdog.hpp"

using boxcar::detail::DeadlineWatchdog;
using namespace std::chrono_literals;

TEST_CASE("a deadline action that throws is contained and the watchdog fires the next deadline") {
  DeadlineWatchdog watchdog;
  std::atomic<int> fired{0};
  watchdog.arm(std::chrono::steady_clock::now() + 10ms, [&] {
    ++fired;
    throw std::runtime_error("PQcancel() -- connect() failed: No route to host");
  });
  for (int i = 0; i < 200 && fired.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  REQUIRE(fired.load() == 1);
  watchdog.disarm();  // returns: the throwing action finished

  std::atomic<bool> second{false};
  watchdog.arm(std::chrono::steady_clock::now() + 10ms, [&] { second = true; });
  for (int i = 0; i < 200 && !second.load(); ++i) std::this_thread::sleep_for(5ms);
  CHECK(second.load());
  watchdog.disarm();
}

// The watchdog thread sleeps toward the deadline it last saw and is not woken by disarm()
// or by a later deadline; an earlier one must still wake it in time, and a disarmed action
// must never run when the thread wakes for a deadline that is gone.
TEST_CASE("a deadline earlier than the one the watchdog sleeps toward still fires, a disarmed one never") {
  DeadlineWatchdog watchdog;
  std::atomic<int> far_fired{0};
  watchdog.arm(std::chrono::steady_clock::now() + 60s, [&] { ++far_fired; });
  std::this_thread::sleep_for(20ms);  // the thread now sleeps toward +60 s
  watchdog.disarm();

  std::atomic<int> near_fired{0};
  const auto armed_at = std::chrono::steady_clock::now();
  watchdog.arm(armed_at + 20ms, [&] { ++near_fired; });
  for (int i = 0; i < 400 && near_fired.load() == 0; ++i) std::this_thread::sleep_for(5ms);
  CHECK(near_fired.load() == 1);
  CHECK(std::chrono::steady_clock::now() - armed_at < 1s);
  watchdog.disarm();

  // Armed and disarmed in turn with ever later deadlines, as a handler thread does: none
  // of them passes, so none fires, although the thread wakes for the first one's deadline.
  std::atomic<int> sequence_fired{0};
  for (int i = 0; i < 5; ++i) {
    watchdog.arm(std::chrono::steady_clock::now() + 30ms, [&] { ++sequence_fired; });
    std::this_thread::sleep_for(10ms);
    watchdog.disarm();
  }
  std::this_thread::sleep_for(80ms);  // past every deadline armed above
  CHECK(sequence_fired.load() == 0);
  CHECK(far_fired.load() == 0);
}
