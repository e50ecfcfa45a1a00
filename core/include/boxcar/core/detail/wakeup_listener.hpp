// WakeupListener: an idle loop's way to sleep until a NOTIFY on its channel arrives (or
// a deadline passes), on its own connection outside the pool. Connects lazily,
// reconnects after a failure, and without a connection simply sleeps: polling stays the
// fallback, so a lost notification only costs latency.
//
// Thread-safety: one thread at a time (the loop that owns it).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <spdlog/fwd.h>

namespace boxcar::detail {

class WakeupListener {
 public:
  WakeupListener(std::string connection_string, std::string channel, std::shared_ptr<spdlog::logger> log);
  ~WakeupListener();
  WakeupListener(const WakeupListener&) = delete;
  WakeupListener& operator=(const WakeupListener&) = delete;

  /// Opens the LISTEN connection if there is none (a failure is logged, not thrown).
  void ensure_listening();

  /// Returns when a notification arrives, `until` passes, or `stop()` turns true
  /// (checked at least every 100 ms). Never busy-loops.
  void wait_until(std::chrono::steady_clock::time_point until, const std::function<bool()>& stop);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxcar::detail
