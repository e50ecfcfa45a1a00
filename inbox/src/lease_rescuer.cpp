// Lease recovery without claiming.
#include "lease_rescuer.hpp"

#include "boxcar/core/logging.hpp"

namespace boxcar::detail {

LeaseRescuer::LeaseRescuer(ReceiptStore& store, const WorkerOptions& options, AtomicWorkerStats& stats)
    : store_(store), options_(options), stats_(stats), log_(logger("worker")) {}

std::size_t LeaseRescuer::release_expired(const std::string& consumer) {
  const auto dead = store_.release_expired(consumer, options_.claim_limit, options_.max_attempts);
  for (const auto& receipt : dead) {
    ++stats_.lease_expired;
    ++stats_.dead;
    if (options_.metrics) options_.metrics->processed(receipt.consumer, receipt.event_type, "dead");
    log_event(*log_, LogLevel::Warn, "receipt is DEAD: its attempts ended in lease expiry",
              {{"outcome", "dead"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)}});
  }
  return dead.size();
}

}  // namespace boxcar::detail
