// boxcar::Heartbeat — a background loop's proof of life. The loop beats once per
// iteration; a liveness probe reads how long ago that was, without locks and without
// touching the database or the broker, so it answers even while both are down.
//
// Thread-safety: beat() from the loop's thread, age() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>

namespace boxcar {

class Heartbeat {
 public:
  using Clock = std::chrono::steady_clock;

  /// The loop is alive now.
  void beat() noexcept { last_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }

  /// Time since the last beat; nullopt before the first one.
  std::optional<Clock::duration> age() const noexcept {
    const auto last = last_.load(std::memory_order_relaxed);
    if (last == kNever) return std::nullopt;
    return Clock::now() - Clock::time_point(Clock::duration(last));
  }

 private:
  static constexpr Clock::rep kNever = Clock::duration::min().count();
  std::atomic<Clock::rep> last_{kNever};
};

}  // namespace boxcar
