// The wait of WakeupListener::wait_until() (core/src/wakeup_listener.cpp): libpq blocks
// until a notification arrives when given a negative timeout, so a deadline that passed
// while the thread was preempted must give a zero wait, never a negative one.
#include <catch2/catch.hpp>

#include "boxcar/core/detail/wakeup_listener.hpp"

using boxcar::detail::wait_slice;
using namespace std::chrono_literals;

TEST_CASE("a wake-up wait whose deadline has passed is zero, never negative") {
  const auto until = std::chrono::steady_clock::now();
  CHECK(wait_slice(until, until) == 0ms);
  CHECK(wait_slice(until + 8ms, until) == 0ms);  // the old computation gave -7 ms here
  CHECK(wait_slice(until + 10s, until) == 0ms);
}

TEST_CASE("a wake-up wait reaches its deadline in slices of at most 100 ms") {
  const auto until = std::chrono::steady_clock::now() + 1h;
  CHECK(wait_slice(until - 500us, until) == 1ms);  // rounded up: never a busy loop
  CHECK(wait_slice(until - 20ms, until) == 21ms);
  CHECK(wait_slice(until - 99ms, until) == 100ms);
  CHECK(wait_slice(until - 5s, until) == 100ms);
}
