// The worker's handler threads: each takes claimed receipts from the local queue (a batch,
// or with batch_size 1 one message and a short run after it) and runs them through the
// MessageProcessor; with batch_size > 1 an idle thread claims its own batch while a
// consumer has a backlog. A thread whose handler ignores its deadline is abandoned:
// detached, its attempt's session terminated, and replaced (docs/worker.md, "Handlers that
// never return", "Runs").
//
// Lifetime: a handler thread keeps the worker's internals alive through `owner` (given to
// start()), because an abandoned thread is detached and may return long after stop() and
// ~Worker.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/fwd.h>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/inbox/detail/deadline_watchdog.hpp"
#include "boxcar/inbox/worker.hpp"
#include "claims.hpp"
#include "in_flight_registry.hpp"
#include "message_processor.hpp"
#include "owned_consumer.hpp"
#include "receipt_store.hpp"
#include "work_queue.hpp"

namespace boxcar::detail {

class HandlerPool {
 public:
  using Clock = std::chrono::steady_clock;

  /// A handler still running this long after its deadline (its signal fired, its query was
  /// cancelled) ignores cancellation: its thread is abandoned and replaced.
  static constexpr auto kAbandonAfter = std::chrono::seconds(1);

  /// The identities of a batch, comma-separated, for the log line of an abandonment.
  struct Identities {
    std::string consumers, message_ids, receipt_ids, attempts;
  };

  /// A thread given up on, reported outside the work queue's lock (report()).
  struct Abandonment {
    Identities identities;
    std::string cause;
    std::optional<InFlightRegistry::Abandoned> attempt;
    // The rest of the thread's run, never started: handed back.
    std::vector<ClaimedReceipt> unstarted;
  };

  HandlerPool(const WorkerOptions& options, OwnedConsumers& consumers, WorkQueue& work, Claims& claims,
              MessageProcessor& processor, InFlightRegistry& in_flight, ReceiptStore& store,
              std::shared_ptr<ConnectionPool> pool, std::shared_ptr<spdlog::logger> log);

  /// Starts `concurrency` handler threads (under the work queue's lock); each keeps
  /// `owner` alive while it runs.
  void start_locked(const std::shared_ptr<void>& owner);
  /// Under the work queue's lock: the runs of threads busy with one message for longer
  /// than kRunStall go back to the front of the queue, in claim order, for idle threads.
  /// Not once stop() has begun. Returns whether any did.
  bool requeue_stalled_runs_locked(Clock::time_point now);
  /// The supervisor's check: gives up the thread of each attempt still running past
  /// `cutoff` (abandoning it in the registry while its connection is certainly alive),
  /// and starts a replacement unless stopping. Returns them for report().
  std::vector<Abandonment> abandon_overdue(Clock::time_point cutoff);
  /// Under the work queue's lock, at shutdown: gives up every thread still busy (no
  /// replacement).
  std::vector<Abandonment> abandon_busy_locked(const std::string& cause);
  /// Outside the lock: hands back the rest of the thread's run, counts, logs, and
  /// terminates the abandoned attempt's server session, so a handler that keeps issuing
  /// statements cannot hold its aborted transaction (and the receipt's row lock) open.
  /// Lease recovery then retries the receipt or makes it DEAD.
  void report(Abandonment& abandonment);
  /// Joins every thread not abandoned (after stop() told them to end).
  void join_all();

  std::uint64_t abandoned_total() const { return abandoned_total_.load(); }
  std::uint64_t handler_thread_claims() const { return handler_thread_claims_.load(); }

 private:
  struct Slot;
  void spawn_locked();
  void handle_loop(Slot& slot);
  /// Waits for work and takes it (under the lock); false when the thread must end.
  bool take_work(Slot& slot, std::vector<ClaimedReceipt>& batch, std::optional<std::size_t>& self_claim,
                 bool& run_needs_renewal, std::size_t& queue_level);
  /// A self-claim's outcome, back under the lock: the batch to run, or false when there is
  /// none (or the thread was abandoned meanwhile: then `ended` is set).
  bool finish_self_claim(Slot& slot, std::size_t index, std::vector<ClaimedReceipt>& batch, bool& ended);
  /// Runs `batch` and then the rest of the slot's run; false when the thread was abandoned
  /// meanwhile and must end.
  bool run_batch_and_run(Slot& slot, std::vector<ClaimedReceipt>& batch, bool run_needs_renewal,
                         DeadlineWatchdog& watchdog);
  void take_locked(Slot& slot, std::vector<ClaimedReceipt>& batch);
  /// A handler thread's own claim of one batch of consumers_[index], made while it counts
  /// as busy (so the suspect lane waits for it). The dispatcher's due flags are untouched.
  std::vector<ClaimedReceipt> claim_for_self(std::size_t index);
  Abandonment abandon_locked(const std::shared_ptr<Slot>& slot, std::string cause,
                             std::optional<InFlightRegistry::Abandoned> attempt);
  static Identities describe(const std::vector<ClaimedReceipt>& batch);
  /// A run's claims wait out the transaction of the message before them: one deadline,
  /// and the grace before an ignoring handler is abandoned.
  Clock::time_point run_needed_until() const;

  const WorkerOptions& options_;
  OwnedConsumers& consumers_;
  WorkQueue& work_;
  Claims& claims_;
  MessageProcessor& processor_;
  InFlightRegistry& in_flight_;
  ReceiptStore& store_;
  std::shared_ptr<ConnectionPool> pool_;
  std::shared_ptr<spdlog::logger> log_;
  std::weak_ptr<void> owner_;
  // Guarded by the work queue's mutex.
  std::vector<std::shared_ptr<Slot>> slots_;
  std::atomic<std::uint64_t> abandoned_total_{0};
  std::atomic<std::uint64_t> handler_thread_claims_{0};
};

}  // namespace boxcar::detail
