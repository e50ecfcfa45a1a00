// WakeupListener: an idle loop's way to sleep until a NOTIFY on its channel arrives (or
// a deadline passes), on its own connection outside the pool. Connects lazily,
// reconnects after a failure, and without a connection simply sleeps: polling stays the
// fallback, so a lost notification only costs latency.
//
// It reports what woke it: the payloads received, so a loop that serves only some of the
// channel's keys (a worker owning some consumers) can ignore the others' notifications
// without waking, and whether notifications may have been missed (the connection was
// lost), after which the caller should act as if notified of everything.
//
// Thread-safety: one thread at a time (the loop that owns it).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include <spdlog/fwd.h>

namespace boxcar::detail {

/// How long one wait of WakeupListener::wait_until() blocks: up to `until`, rounded up to
/// a whole millisecond, at most 100 ms; zero once `until` has passed. Never negative: a
/// negative timeout makes libpq's wait block until a notification arrives, which may be
/// never (a thread preempted between its deadline check and this computation used to get
/// one, and a stopping Worker then waited forever for its dispatcher).
std::chrono::milliseconds wait_slice(std::chrono::steady_clock::time_point now,
                                     std::chrono::steady_clock::time_point until);

class WakeupListener {
 public:
  /// What ended a wait_until().
  struct Wakeup {
    /// Distinct payloads of the wanted notifications that arrived (empty after a
    /// timeout or a stop request).
    std::set<std::string> payloads;
    /// The LISTEN connection was lost: notifications sent meanwhile are gone.
    bool may_have_missed = false;
  };
  /// Which payloads end a wait; null: every payload.
  using Filter = std::function<bool(const std::string& payload)>;

  WakeupListener(std::string connection_string, std::string channel, std::shared_ptr<spdlog::logger> log);
  ~WakeupListener();
  WakeupListener(const WakeupListener&) = delete;
  WakeupListener& operator=(const WakeupListener&) = delete;

  /// Opens the LISTEN connection if there is none (a failure is logged, not thrown).
  /// Returns true when it opened one now: nothing sent before it was received, so the
  /// caller should look at everything once (after this call, to leave no gap).
  bool ensure_listening();

  /// Returns when a notification whose payload `wanted` accepts arrives (others are taken
  /// and ignored without returning), `until` passes, `stop()` turns true (checked at least
  /// every 100 ms), or the connection is lost. Never busy-loops.
  Wakeup wait_until(std::chrono::steady_clock::time_point until, const std::function<bool()>& stop,
                    const Filter& wanted = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxcar::detail
