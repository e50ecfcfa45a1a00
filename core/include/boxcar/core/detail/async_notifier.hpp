// AsyncNotifier paces the PostgreSQL NOTIFY wake-ups of one channel, sending them either
// on a writer's own statement (a ride) or from a background thread.
//
// Why not NOTIFY in every writer's transaction: PostgreSQL serialises the commits of all
// notifying transactions behind one database-wide lock, held through each one's WAL flush,
// which would turn concurrent writers into serialised fsyncs. Why not always a separate
// transaction: that is a commit of its own, which costs concurrent committers more than a
// NOTIFY inside a commit they make anyway (docs/benchmarks.md, "Wake-ups ride on inserts").
// So at most one wake-up is in flight at a time, at most one per interval:
// - A writer about to commit rows asks for a ride (begin_ride). When one is due, its
//   statement notifies its own keys and every key pending, and reports whether it
//   committed them (end_ride); otherwise it commits without NOTIFY and marks its keys
//   dirty afterwards (notify).
// - Keys still dirty when the interval has passed (and, after a ride, max_interval more,
//   the writers' chance to take them on the next ride) go out from the background thread,
//   one pg_notify per key in one autocommit statement: the trailing edge of a stream, and
//   every wake-up of writers that never ride.
// A key marked after its rows committed is covered by any NOTIFY that commits later, so a
// ride, which begins after the mark, carries it. Notifications are hints: listeners also
// poll, so a lost one only costs latency.
//
// Thread-safety: every member may be called from any thread; none blocks on I/O.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace boxcar::detail {

class AsyncNotifier {
 public:
  using Clock = std::chrono::steady_clock;

  /// `connection_string` is used for the notifier's own connection (opened lazily and
  /// reopened after failures); `channel` is the NOTIFY channel. After a send (a ride or
  /// the thread's) the next one waits at least the current interval; a key marked after
  /// that goes out at once. The interval is `min_interval` while keys are marked at most
  /// once per `min_interval` (every call of notify() counts, a repeated key too, and every
  /// key a ride carries of its own); at a higher rate (a stream) it doubles at each send, up to `max_interval`,
  /// and falls back to `min_interval` at the first send after the rate dropped. So a
  /// stream costs at most one notification per `max_interval`, and a slower one no wait
  /// at all (docs/worker.md, "Wake-ups").
  AsyncNotifier(std::string connection_string, std::string channel,
                std::chrono::microseconds min_interval = std::chrono::milliseconds(1),
                std::chrono::microseconds max_interval = std::chrono::milliseconds(4));
  ~AsyncNotifier();
  AsyncNotifier(const AsyncNotifier&) = delete;
  AsyncNotifier& operator=(const AsyncNotifier&) = delete;

  /// Queues one notification with `payload` (deduplicated until sent), for rows that
  /// committed before the call.
  void notify(const std::string& payload);

  /// A wake-up that a writer's statement carries.
  struct Ride {
    /// What the statement notifies: the writer's own keys and every key taken over.
    std::vector<std::string> payloads;
    /// The keys that were pending when the ride began.
    std::vector<std::string> taken;
  };
  /// How a ride's statement ended.
  enum class RideEnd {
    /// It committed its NOTIFY.
    Carried,
    /// It inserted no row (a duplicate), so its NOTIFY never ran and its own keys need
    /// none: only the keys it took over are pending again.
    NothingInserted,
    /// It failed, or its commit's outcome is unknown: every key is pending again.
    Failed,
  };
  /// Before a writer's statement that may insert rows for `own`: a Ride when a send is due
  /// now (it takes over every key pending), else nothing, and the writer calls notify()
  /// for its keys once its rows have committed.
  std::optional<Ride> begin_ride(std::span<const std::string> own);
  /// The ride's statement ended; what it did not carry goes back to the thread. A carried
  /// ride counts as a send made now, when its statement committed.
  void end_ride(Ride ride, RideEnd end);

  /// Waits until everything queued before the call has been sent or dropped, and no ride
  /// is in flight (tests).
  void flush();

  struct Stats {
    /// The thread's statements (each carries every key that was dirty), failed ones included.
    std::uint64_t sends = 0;
    /// Writers' statements that carried a wake-up and committed it.
    std::uint64_t rides = 0;
    /// The wait after the last send: min_interval, longer in a stream.
    std::chrono::microseconds interval{};
  };
  Stats stats() const;

  const std::string& channel() const noexcept { return channel_; }

 private:
  void run();
  // Under mutex_: a send (a ride or the thread's) starts now; moves the pacing on.
  void start_send_locked(Clock::time_point now);

  std::string connection_string_;
  std::string channel_;
  const std::chrono::microseconds min_interval_;
  const std::chrono::microseconds max_interval_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable idle_;
  std::set<std::string> pending_;
  // notify() and begin_ride() calls since the last send started, repeated keys included:
  // the rate.
  std::uint64_t marks_ = 0;
  // The wait after the last send (Stats::interval), and when that send started; none
  // yet: long ago.
  std::chrono::microseconds interval_;
  Clock::time_point last_send_;
  std::uint64_t sends_ = 0;
  std::uint64_t rides_ = 0;
  // A send (the thread's or a ride) is in flight: no other starts.
  bool sending_ = false;
  // The last send was a ride: writers are riding, so the thread leaves them the next one.
  bool last_was_ride_ = false;
  // What the thread waits for, so that writers wake it only when it waits for them. While
  // it waits for its own deadline it needs none: it looks again then. Waking it on every
  // ride and every new key would cost a one-thread accept() 1.5 futex calls, against 0.4
  // (docs/benchmarks.md, "Wake-ups ride on inserts").
  enum class ThreadWait { ForKeys, ForDeadline, ForRide, Busy };
  ThreadWait thread_waits_ = ThreadWait::Busy;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace boxcar::detail
