// The claims a Worker holds: taking them (one claim of a consumer at a time, in its lane,
// fair over scopes or oldest due first), keeping the leases of those that wait long, and
// handing back those that will not run (docs/worker.md, "Claims", "How long a claim is
// held", "Shutdown").
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/fwd.h>

#include "boxcar/inbox/worker.hpp"
#include "claimed_receipt.hpp"
#include "worker_stats.hpp"
#include "owned_consumer.hpp"
#include "receipt_store.hpp"
#include "work_queue.hpp"

namespace boxcar::detail {

class Claims {
 public:
  using Clock = std::chrono::steady_clock;

  Claims(ReceiptStore& store, const WorkerOptions& options, AtomicWorkerStats& stats, WorkQueue& work,
         std::shared_ptr<spdlog::logger> log);

  /// One claim statement for `consumer`, run once no other claim of it runs in this
  /// process, counted (stats and metric: what wake-ups cost). Fair (WorkerOptions::
  /// fair_claims) shares `limit` out over the consumer's scopes, round robin from where
  /// its last fair claim ended. Never claims suspects. @throws what the statement throws.
  std::vector<ClaimedReceipt> claim(OwnedConsumer& consumer, std::size_t limit);
  /// Counts receipts a claim took (claimed stats and metric).
  void count_claimed(const std::string& consumer, const std::vector<ClaimedReceipt>& got);
  /// Renews, in one statement outside the work queue's lock, the leases of the receipts
  /// in `waiting` (the queue, or a thread's run; guarded by that lock) that may end
  /// before `needed_until`, and moves their lease_until on. Only claims that waited long
  /// need it, so it usually finds none and sends nothing. Never throws.
  void renew_running_out(std::deque<ClaimedReceipt>& waiting, Clock::time_point needed_until);
  /// Hands claims that will not run back without spending their attempt. Never throws:
  /// on failure their leases expire.
  void hand_back(const std::vector<ClaimedReceipt>& receipts);
  /// hand_back() while the worker runs; through WorkQueue::keep_unstarted_locked once
  /// stop() has begun.
  void hand_back_unstarted(std::vector<ClaimedReceipt> receipts);

  std::uint64_t statements() const { return statements_.load(); }

 private:
  ReceiptStore& store_;
  const WorkerOptions& options_;
  AtomicWorkerStats& stats_;
  WorkQueue& work_;
  std::shared_ptr<spdlog::logger> log_;
  std::atomic<std::uint64_t> statements_{0};
};

}  // namespace boxcar::detail
