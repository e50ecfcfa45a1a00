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
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace boxcar::detail {

class AsyncNotifier {
 public:
  /// `connection_string` is used for the notifier's own connection (opened lazily and
  /// reopened after failures); `channel` is the NOTIFY channel. After a send the next
  /// one waits at least `min_interval`: a key marked dirty after a quiet period goes out
  /// at once, a busy stream costs at most one notification per interval.
  AsyncNotifier(std::string connection_string, std::string channel,
                std::chrono::microseconds min_interval = std::chrono::milliseconds(1));
  ~AsyncNotifier();
  AsyncNotifier(const AsyncNotifier&) = delete;
  AsyncNotifier& operator=(const AsyncNotifier&) = delete;

  /// Queues one notification with `payload` (deduplicated until sent).
  void notify(const std::string& payload);

  /// Waits until everything queued before the call has been sent or dropped (tests).
  void flush();

  const std::string& channel() const noexcept { return channel_; }

 private:
  void run();

  std::string connection_string_;
  std::string channel_;
  std::chrono::microseconds min_interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::set<std::string> pending_;
  bool sending_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace boxcar::detail
