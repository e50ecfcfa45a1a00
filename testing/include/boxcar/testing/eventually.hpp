// Waiting in tests for something another thread or process does: poll a condition until it
// holds or a liveness bound passes. The bound only decides how long a failing test waits;
// a passing test returns as soon as the condition holds, so timings never decide a verdict.
//
//   CHECK(boxcar::testing::eventually([&] { return db.count("SELECT count(*) FROM ...") == 3; }));
//   CHECK(boxcar::testing::eventually_equals(queue_depth, 0u) == 0u);  // prints the last value
//
// Blocks the calling thread; thread-safe as the condition it calls.
#pragma once

#include <chrono>
#include <functional>
#include <thread>

namespace boxcar::testing {

/// How long eventually() waits by default before it gives up.
inline constexpr std::chrono::milliseconds kEventuallyLimit{30'000};
/// How often eventually() asks again.
inline constexpr std::chrono::milliseconds kEventuallyPoll{20};

/// Calls `condition` until it returns true (then true) or `limit` passed (then its last
/// answer, asked once more after the deadline).
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = kEventuallyLimit);

/// Calls `read` until it returns `expected` or `limit` passed, and returns the last value
/// read, so that `CHECK(eventually_equals(read, x) == x)` reports what was there instead.
template <class T>
T eventually_equals(const std::function<T()>& read, const T& expected,
                    std::chrono::milliseconds limit = kEventuallyLimit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  T value = read();
  while (!(value == expected) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(kEventuallyPoll);
    value = read();
  }
  return value;
}

}  // namespace boxcar::testing
