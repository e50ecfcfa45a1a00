// The deadline timer behind handler cut-offs.
#include "deadline_watchdog.hpp"

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
  {
    std::lock_guard lock(mutex_);
    deadline_ = deadline;
    action_ = std::move(action);
    armed_ = true;
  }
  changed_.notify_all();
}

void DeadlineWatchdog::disarm() {
  std::unique_lock lock(mutex_);
  armed_ = false;
  action_ = nullptr;
  changed_.notify_all();
  changed_.wait(lock, [&] { return !firing_; });
}

void DeadlineWatchdog::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      changed_.wait(lock);
      continue;
    }
    if (changed_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
        std::chrono::steady_clock::now() >= deadline_) {
      auto action = std::move(action_);
      armed_ = false;
      firing_ = true;
      lock.unlock();
      if (action) action();
      lock.lock();
      firing_ = false;
      changed_.notify_all();
    }
  }
}

}  // namespace boxcar::detail
