// A per-thread timer that fires an action at a deadline unless disarmed first: at a
// handler's deadline it fires the cancellation signal and cancels the running query, so
// a handler that ignores its signal still cannot keep working past the deadline. Internal
// to boxcar::inbox (public only so that its unit test can reach it).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace boxcar::detail {

class DeadlineWatchdog {
 public:
  DeadlineWatchdog();
  ~DeadlineWatchdog();
  DeadlineWatchdog(const DeadlineWatchdog&) = delete;
  DeadlineWatchdog& operator=(const DeadlineWatchdog&) = delete;

  /// Runs `action` on the watchdog thread at `deadline` unless disarm() comes first. An
  /// exception the action throws is logged and dropped: it must not end the process
  /// (cancelling a query fails while the database is unreachable).
  void arm(std::chrono::steady_clock::time_point deadline, std::function<void()> action);
  /// Cancels the pending action; when it is already running, waits for it to finish.
  void disarm();

  /// arm() now, disarm() at scope exit.
  class Armed {
   public:
    Armed(DeadlineWatchdog& watchdog, std::chrono::steady_clock::time_point deadline, std::function<void()> action)
        : watchdog_(watchdog) {
      watchdog_.arm(deadline, std::move(action));
    }
    ~Armed() { watchdog_.disarm(); }
    Armed(const Armed&) = delete;
    Armed& operator=(const Armed&) = delete;

   private:
    DeadlineWatchdog& watchdog_;
  };

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::function<void()> action_;
  std::chrono::steady_clock::time_point deadline_;
  // When the watchdog thread wakes next (max while nothing is armed). arm() wakes it only
  // for an earlier deadline and disarm() never does: with one handler after another, each
  // deadline later than the last, the thread sleeps through them instead of waking twice
  // per message, and at its wake-up sleeps on until whatever is armed then.
  std::chrono::steady_clock::time_point wakes_at_ = std::chrono::steady_clock::time_point::max();
  bool armed_ = false;
  bool firing_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace boxcar::detail
