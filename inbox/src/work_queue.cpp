// The worker's shared queue and flags.
#include "work_queue.hpp"

#include <algorithm>

namespace boxcar::detail {

WorkQueue::WorkQueue(const WorkerOptions& options, OwnedConsumers& consumers)
    : options_(options), consumers_(consumers) {}

// Room for every handler thread to take two batches, or two runs with batch_size 1, and
// never less than two full claims. A claim is a commit that waits for its WAL flush;
// refilled at half, the queue takes claim_limit receipts a claim, so one flush serves that
// many messages (docs/benchmarks.md, "Claims amortised"). Claims that wait long have their
// leases renewed (Claims::renew_running_out).
std::size_t WorkQueue::capacity() const {
  return std::max(options_.concurrency * (options_.batch_size > 1 ? options_.batch_size : kRunLength) * 2,
                  2 * options_.claim_limit);
}

std::vector<ClaimedReceipt> WorkQueue::keep_unstarted_locked(std::vector<ClaimedReceipt> receipts) {
  for (auto& r : receipts) unstarted_at_stop.push_back(std::move(r));
  if (dispatcher_claiming || handler_claims_running > 0) return {};
  return std::exchange(unstarted_at_stop, {});
}

std::optional<std::size_t> WorkQueue::backlogged_consumer_locked() {
  if (options_.batch_size < 2 || suspect_lane || !queue.empty()) return std::nullopt;
  for (std::size_t i = 0; i < consumers_.size(); ++i) {
    const std::size_t index = (next_self_claim_ + i) % consumers_.size();
    if (!consumers_[index]->backlogged) continue;
    next_self_claim_ = (index + 1) % consumers_.size();
    return index;
  }
  return std::nullopt;
}

}  // namespace boxcar::detail
