// The handler attempts running right now, so that shutdown can signal and cut them off,
// and so that an attempt whose handler ignores its deadline can be found and abandoned.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/cancellation.hpp"
#include "server_session.hpp"

namespace boxcar::detail {

/// Thread-safe. Every pointer in an entry stays valid until its own thread remove()s it:
/// the registry's mutex is what lets other threads use them.
class InFlightRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  struct Entry {
    CancellationSource* source;
    pqxx::connection* connection;
    Clock::time_point deadline;
    /// The server session and transaction that run the attempt, as its lock statement
    /// read them from the server.
    ServerSession session{};
  };

  /// What is left of an abandoned attempt for the thread that abandoned it.
  struct Abandoned {
    /// The server session and transaction of the attempt (backend_pid 0 when unknown).
    ServerSession session{};
  };

  /// Registers the calling thread's attempt; fires its signal at once when shutdown began.
  std::size_t add(Entry entry);
  /// Called by the attempt's own thread when its handlers are done; returns whether the
  /// attempt was abandoned meanwhile.
  bool remove(std::size_t key);
  /// Fires every in-flight signal, and every later one at once (shutdown began).
  void cancel_signals();
  /// Ends what cancel_signals() began for later attempts: a restarted worker's handlers
  /// get live signals again. Signals already fired stay fired.
  void resume();
  /// Cancels the running query of every in-flight transaction (grace period over).
  void cancel_queries();
  /// Attempts not abandoned.
  std::size_t size() const;

  /// Threads whose attempt is still running past `cutoff`, its deadline long gone.
  std::vector<std::thread::id> overdue(Clock::time_point cutoff) const;
  /// Marks the running attempt of `thread` abandoned and, while its connection is still
  /// certainly alive, passes it to `while_alive`. nullopt when that thread runs no attempt.
  std::optional<Abandoned> abandon(std::thread::id thread, const std::function<void(pqxx::connection&)>& while_alive);

 private:
  struct Running {
    Entry entry;
    std::thread::id thread;
    bool abandoned = false;
  };
  mutable std::mutex mutex_;
  std::map<std::size_t, Running> entries_;
  std::size_t next_ = 0;
  bool cancelled_ = false;
};

}  // namespace boxcar::detail
