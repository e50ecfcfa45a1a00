// AsyncNotifier sends PostgreSQL NOTIFY wake-ups off the caller's path.
//
// Why not NOTIFY inside the writer's transaction: PostgreSQL serialises the commits of
// all notifying transactions behind one database-wide lock, which would turn every
// accept() into a serialised fsync. Instead writers mark a key (a consumer, a topic)
// dirty after their commit; one background thread per notifier sends a single
// pg_notify per dirty key, coalescing whatever accumulates while it is busy.
// Notifications are hints: listeners also poll, so a lost one only costs latency.
//
// Thread-safety: notify() may be called from any thread; it never blocks on I/O.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace boxcar::detail {

class AsyncNotifier {
 public:
  /// `connection_string` is used for the notifier's own connection (opened lazily and
  /// reopened after failures); `channel` is the NOTIFY channel. After a send the next one
  /// waits at least the current interval; a key marked after that goes out at once. The
  /// interval is `min_interval` while keys are marked at most once per `min_interval`
  /// (every call of notify() counts, a repeated key too); at a higher rate (a stream) it
  /// doubles at each send, up to `max_interval`, and falls back to `min_interval` at the
  /// first send after the rate dropped. So a stream costs at most one notification
  /// per `max_interval`, and a slower one no wait at all (docs/worker.md, "Wake-ups").
  AsyncNotifier(std::string connection_string, std::string channel,
                std::chrono::microseconds min_interval = std::chrono::milliseconds(1),
                std::chrono::microseconds max_interval = std::chrono::milliseconds(4));
  ~AsyncNotifier();
  AsyncNotifier(const AsyncNotifier&) = delete;
  AsyncNotifier& operator=(const AsyncNotifier&) = delete;

  /// Queues one notification with `payload` (deduplicated until sent).
  void notify(const std::string& payload);

  /// Waits until everything queued before the call has been sent or dropped (tests).
  void flush();

  struct Stats {
    /// Statements sent (each carries every key that was dirty), failed ones included.
    std::uint64_t sends = 0;
    /// The wait after the last send: min_interval, longer in a stream.
    std::chrono::microseconds interval{};
  };
  Stats stats() const;

  const std::string& channel() const noexcept { return channel_; }

 private:
  void run();

  std::string connection_string_;
  std::string channel_;
  const std::chrono::microseconds min_interval_;
  const std::chrono::microseconds max_interval_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::set<std::string> pending_;
  // notify() calls since the last send started, repeated keys included: the rate.
  std::uint64_t marks_ = 0;
  // The wait after the last send (Stats::interval).
  std::chrono::microseconds interval_;
  std::uint64_t sends_ = 0;
  bool sending_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace boxcar::detail
