// Group commit for concurrent Inbox::accept() calls (InboxOptions::group_commit).
//
// Every autocommit accept() pays its own commit, that is its own WAL flush. The
// coalescer lets calls that arrive while flushes are in flight (Limits::max_flushes of
// them) wait in a queue; when a flush ends, the first waiter becomes the leader, takes
// the queued calls (bounded by Limits) and records them in one shared transaction with
// accept_many semantics, then hands each caller its own result.
//
// Before it takes the queue, a leader gathers: it waits until as many calls are queued as
// the previous flush carried, at most Limits::max_gather and never longer than that flush
// took. Callers that send their next message as soon as their last one is recorded (a
// consumer per partition, a pool of request threads) come back together a moment after
// their flush ended; without the wait, the first of them would take the free slot alone
// and the rest would wait a whole flush behind it (docs/benchmarks.md, "Group
// commit"). A call that finds no flush in flight runs at once on its own when none ended
// within Limits::busy_window, or when the last one carried a single call: nothing lingers
// when idle, and a lone caller pays nothing for the mechanism.
//
// Only the leader of a flush holds a pooled connection; waiting callers hold none.
// Callers must validate their request before calling: an invalid request never joins a
// group, so it can never fail its neighbours.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "boxcar/inbox/inbox.hpp"
#include "prepared_request.hpp"

namespace boxcar::detail {

class AcceptCoalescer {
 public:
  using Clock = std::chrono::steady_clock;

  struct Limits {
    /// Most calls one shared transaction records.
    std::size_t max_items = 100;
    /// Most record bytes (payload, metadata, identity) one shared transaction carries;
    /// the first call of a group always joins, whatever its size.
    std::size_t max_bytes = 0;
    /// Most flushes in flight at once; a call queues only when this many are.
    std::size_t max_flushes = 1;
    /// Longest a leader waits for the previous flush's number of calls to queue.
    std::chrono::microseconds max_gather{};
    /// A flush of several calls that ended this recently means callers are coming back: a
    /// call that finds no flush in flight leads a gathering group instead of running alone.
    std::chrono::microseconds busy_window{};
  };
  /// Records one validated call on its own (the single-row path), counting its metrics.
  using RunAlone = std::function<Receipt()>;
  /// Records a group in one transaction, one result per request in order, counting each
  /// item's metrics once (Inbox::accept_many). Throws InboxStorageError when the
  /// transaction failed as a whole.
  using RunGroup = std::function<std::vector<AcceptResult>(const std::vector<const PreparedRequest*>&)>;

  AcceptCoalescer(Limits limits, RunGroup run_group);
  AcceptCoalescer(const AcceptCoalescer&) = delete;
  AcceptCoalescer& operator=(const AcceptCoalescer&) = delete;

  /// Records `request` (validated and prepared; `bytes` its record size) either alone through `run_alone` or as part of a group, and returns its receipt.
  /// Blocks while an earlier flush is in flight. Two calls with one identity never share
  /// a group: the later waits for the next one (and then sees a duplicate).
  /// @throws InboxConflictError for this call's own conflict; InboxStorageError when its
  ///   transaction failed (every call of that group gets it; uncertain() for all when the
  ///   commit's outcome is unknown).
  Receipt accept(const PreparedRequest& request, std::size_t bytes, const RunAlone& run_alone);

  GroupCommitStats stats() const;

 private:
  struct Waiter {
    const PreparedRequest* request;
    std::string identity_key;
    std::size_t bytes;
    std::condition_variable wake;
    bool leading = false;  // the flush is this waiter's to run
    bool done = false;     // a leader delivered this waiter's outcome
    std::optional<Receipt> receipt{};
    std::exception_ptr error{};
  };

  // Runs the flush whose slot `self` holds: gathers, takes the group, records it and
  // returns self's own outcome. Entered with `lock` held; releases it.
  Receipt lead(Waiter& self, std::unique_lock<std::mutex>& lock, const RunAlone& run_alone);
  // Under mutex_: waits until the previous flush's number of calls is queued, or until its
  // gathering time is up (Limits::max_gather, and no more than the previous flush took).
  void gather_locked(std::unique_lock<std::mutex>& lock);
  // Under mutex_: whether a flush ended within Limits::busy_window, carrying more than one call.
  bool busy_locked(Clock::time_point now) const;
  // The designated `leader` and the queued calls that fit with it. Caller holds mutex_.
  std::vector<Waiter*> take_group(Waiter& leader);
  // Records `group` in one transaction, hands the flush slot on (`handed_off`) and
  // delivers every member's outcome but the leader's (group[0]), which it returns
  // through `own`.
  void run_group(const std::vector<Waiter*>& group, std::optional<Receipt>& own, std::exception_ptr& own_error,
                 bool& handed_off, Clock::time_point started);
  // A flush of `calls` calls, begun at `started`, ended: its slot goes to the longest
  // waiter, or is freed. hand_off_locked() with mutex_ held.
  void hand_off(std::size_t calls, Clock::time_point started);
  void hand_off_locked(std::size_t calls, Clock::time_point started);

  const Limits limits_;
  const RunGroup run_group_;
  mutable std::mutex mutex_;
  std::size_t flushes_ = 0;  // running, or handed to a waiter that has yet to wake
  std::deque<Waiter*> queue_;
  // What the last flush to end carried, when it ended and how long it took: what the next
  // leader gathers for.
  std::size_t last_calls_ = 0;
  Clock::time_point last_end_{};
  Clock::duration last_took_{};
  // A leader is gathering: arrivals tell it when the queue reaches its count.
  bool gathering_ = false;
  std::condition_variable gathered_;
  GroupCommitStats stats_{};
};

}  // namespace boxcar::detail
