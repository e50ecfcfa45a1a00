// What a Worker's threads coordinate on: the local queue of claimed receipts waiting for a
// handler thread, and the flags of the worker's life (stopping, the suspect lane, threads
// busy), all guarded by one mutex. The dispatcher fills the queue, the handler threads
// take from it, the supervisor watches them, and stop() empties it (docs/worker.md,
// "Back-pressure", "Shutdown").
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

#include "boxcar/inbox/worker.hpp"
#include "claimed_receipt.hpp"
#include "owned_consumer.hpp"

namespace boxcar::detail {

/// With batch_size 1 a handler thread takes up to this many consecutive claims from a deep
/// queue and runs them one transaction after another (a run). Neighbouring receipts share
/// heap pages, and sixteen threads each locking and completing one of sixteen neighbours
/// contend for them: a raw loop of Boxcar's statements fed from one shared queue ran at
/// 0.92 of the same loop with a claim per thread (docs/benchmarks.md, "Claim lanes and
/// runs").
inline constexpr std::size_t kRunLength = 4;

/// Members are guarded by `mutex` unless said otherwise; the *_locked functions expect it
/// held.
struct WorkQueue {
  WorkQueue(const WorkerOptions& options, OwnedConsumers& consumers);

  std::mutex mutex;
  /// Handler threads wait here for work: claims queued, a backlog to claim from, or stop.
  /// Two conditions, so that no queue change wakes threads with nothing to do.
  std::condition_variable work_available;
  /// The dispatcher and stop() wait here for room in the queue or an idle process (a take,
  /// a handler's end).
  std::condition_variable room_or_idle;
  /// The supervisor's own: it has nothing to do on the queue changes of every message.
  std::condition_variable supervisor_wakeup;

  std::deque<ClaimedReceipt> queue;
  bool stopping = false;
  /// From start() until stop() has joined the dispatcher: it may claim.
  bool dispatcher_claiming = false;
  /// Handler threads' own claims under way (batch_size > 1, while a consumer is backlogged).
  std::size_t handler_claims_running = 0;
  /// Unstarted claims that stop() hands back once no claim can take them again.
  std::vector<ClaimedReceipt> unstarted_at_stop;
  bool supervising = false;
  std::size_t busy_threads = 0;
  /// A suspect is due, so nothing else is claimed (handler threads included) and suspects
  /// run one at a time once the process is idle (docs/worker.md, "the suspect lane").
  /// Written only by the dispatcher, under the mutex; the dispatcher reads it without.
  bool suspect_lane = false;

  /// Claimed-but-unstarted work is bounded (docs/worker.md, "Back-pressure").
  std::size_t capacity() const;
  /// The dispatcher refills a busy queue once it is down to this.
  std::size_t refill_level() const { return capacity() / 2; }
  /// Nothing queued and no handler thread busy in this process.
  bool idle_locked() const { return queue.empty() && busy_threads == 0; }
  /// Once stop() has begun: keeps `receipts` (unstarted) until no claim can be under way,
  /// then returns every receipt kept, to be handed back outside the lock. A claim that
  /// started before stop() could otherwise take a receipt handed back meanwhile, and it
  /// would be handed back twice.
  std::vector<ClaimedReceipt> keep_unstarted_locked(std::vector<ClaimedReceipt> receipts);
  /// An owned consumer whose last claim came back full, round robin, while the queue is
  /// empty and no suspect runs alone; only with batch_size > 1 (a claim per message would
  /// double the statements of one-message transactions, which the dispatcher's claims of
  /// claim_limit already keep busy).
  std::optional<std::size_t> backlogged_consumer_locked();

 private:
  const WorkerOptions& options_;
  OwnedConsumers& consumers_;
  std::size_t next_self_claim_ = 0;
};

}  // namespace boxcar::detail
