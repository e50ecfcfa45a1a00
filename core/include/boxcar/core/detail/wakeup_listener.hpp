// WakeupListener: an idle loop's way to sleep until a NOTIFY on its channel arrives (or
// a deadline passes), on its own connection outside the pool. Connects lazily,
// reconnects after a failure, and without a connection simply sleeps: polling stays the
// fallback, so a lost notification only costs latency.
//
// A reader thread of its own reads the LISTEN connection at all times, busy owner or
// not: a listening backend whose client does not read blocks sending to it, and its
// position then holds the tail of the cluster's NOTIFY queue, which is shared by every
// database; once that queue is full every NOTIFY in the cluster fails (docs/worker.md,
// "Wake-ups"). What the reader receives waits for the owner's next wait_until().
//
// It reports what woke it: the payloads received, so a loop that serves only some of the
// channel's keys (a worker owning some consumers) can ignore the others' notifications
// without waking, and whether notifications may have been missed (the connection was
// lost, or more distinct payloads arrived than it keeps), after which the caller should
// act as if notified of everything.
//
// Thread-safety: ensure_listening() and wait_until() from one thread at a time (the loop
// that owns it); the reader thread is internal.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <set>
#include <string>

#include <spdlog/fwd.h>

namespace boxcar::detail {

/// How long one wait of WakeupListener::wait_until() blocks: up to `until`, rounded up to
/// a whole millisecond, at most 100 ms; zero once `until` has passed. Never negative: a
/// negative timeout used to make libpq's wait block until a notification arrived, which
/// may be never (a thread preempted between its deadline check and this computation got
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
    /// Notifications may be gone: the LISTEN connection was lost, or more than
    /// kMaxPendingPayloads distinct payloads arrived before this wait took them.
    bool may_have_missed = false;
  };
  /// Which payloads end a wait; null: every payload.
  using Filter = std::function<bool(const std::string& payload)>;

  /// Distinct payloads kept between two waits; beyond it they are dropped and the next
  /// wait reports may_have_missed, so a flood of distinct payloads costs bounded memory
  /// (at most this many times PostgreSQL's 8000-byte payload limit).
  static constexpr std::size_t kMaxPendingPayloads = 1024;

  WakeupListener(std::string connection_string, std::string channel, std::shared_ptr<spdlog::logger> log);
  /// Stops the reader thread (promptly: it is woken, not polled) and closes the connection.
  ~WakeupListener();
  WakeupListener(const WakeupListener&) = delete;
  WakeupListener& operator=(const WakeupListener&) = delete;

  /// Opens the LISTEN connection if there is none (a failure is logged, not thrown), on
  /// the calling thread, and hands it to the reader thread. Returns true when it opened
  /// one now: its LISTEN is in place, but nothing sent before it was received, so the
  /// caller should look at everything once (after this call, to leave no gap).
  bool ensure_listening();

  /// Returns when a notification whose payload `wanted` accepts has arrived since the
  /// last wait (others are taken and ignored without returning), `until` passes, `stop()`
  /// turns true (checked at least every 100 ms), or notifications may have been missed.
  /// Never busy-loops.
  Wakeup wait_until(std::chrono::steady_clock::time_point until, const std::function<bool()>& stop,
                    const Filter& wanted = nullptr);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxcar::detail
