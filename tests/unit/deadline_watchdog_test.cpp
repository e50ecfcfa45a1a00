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
