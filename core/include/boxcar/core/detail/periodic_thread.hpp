// A background thread that calls one step now and then again each interval after the
// previous call returned, until stopped. stop() wakes it at once rather than waiting out the
// interval. The backlog collector and the janitor run on one each.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace boxcar::detail {

class PeriodicThread {
 public:
  PeriodicThread() = default;
  ~PeriodicThread() { stop(); }
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  /// Starts the thread; a no-op while it runs. `step` must not throw (the thread would end
  /// the process): callers catch and log what their step may throw.
  void start(std::chrono::milliseconds interval, std::function<void()> step) {
    std::lock_guard lock(mutex_);
    if (thread_.joinable()) return;
    stopping_ = false;
    thread_ = std::thread([this, interval, step = std::move(step)] {
      std::unique_lock lock(mutex_);
      while (!stopping_) {
        lock.unlock();
        step();
        lock.lock();
        wake_.wait_for(lock, interval, [this] { return stopping_; });
      }
    });
  }

  /// Lets the step in progress finish, then joins the thread. Idempotent.
  void stop() {
    std::thread thread;
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
      thread = std::move(thread_);
    }
    wake_.notify_all();
    if (thread.joinable()) thread.join();
  }

 private:
  std::mutex mutex_;  // guards stopping_ and thread_
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace boxcar::detail
