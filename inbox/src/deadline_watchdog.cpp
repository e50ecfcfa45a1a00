// The deadline timer behind handler cut-offs.
#include "boxcar/inbox/detail/deadline_watchdog.hpp"

#include <exception>

#include <spdlog/spdlog.h>

#include "boxcar/core/logging.hpp"

namespace boxcar::detail {

DeadlineWatchdog::DeadlineWatchdog() : thread_([this] { run(); }) {}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  thread_.join();
}

void DeadlineWatchdog::arm(std::chrono::steady_clock::time_point deadline, std::function<void()> action) {
  bool earlier;
  {
    std::lock_guard lock(mutex_);
    deadline_ = deadline;
    action_ = std::move(action);
    armed_ = true;
    earlier = deadline < wakes_at_;
  }
  if (earlier) changed_.notify_all();
}

void DeadlineWatchdog::disarm() {
  std::unique_lock lock(mutex_);
  armed_ = false;
  action_ = nullptr;
  changed_.wait(lock, [&] { return !firing_; });
}

void DeadlineWatchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      wakes_at_ = std::chrono::steady_clock::time_point::max();
      changed_.wait(lock);
      continue;
    }
    if (std::chrono::steady_clock::now() < deadline_) {
      wakes_at_ = deadline_;
      changed_.wait_until(lock, wakes_at_);
      continue;
    }
    auto action = std::move(action_);
    armed_ = false;
    firing_ = true;
    lock.unlock();
    try {
      if (action) action();
    } catch (const std::exception& e) {
      // On this thread an escaping exception would be std::terminate: a handler's
      // deadline firing during a network partition (PQcancel cannot connect) must not
      // take the worker process down. The signal fired before the cancel; the
      // statement_timeout set for the attempt still bounds the query server-side.
      logger("worker")->warn("a deadline action failed (the worker carries on): {}", e.what());
    } catch (...) {
      logger("worker")->warn("a deadline action failed with a non-standard exception (the worker carries on)");
    }
    lock.lock();
    firing_ = false;
    changed_.notify_all();
  }
}

}  // namespace boxcar::detail
