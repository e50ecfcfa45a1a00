// Lease recovery without claiming.
#include "lease_rescuer.hpp"

#include "boxcar/core/logging.hpp"

namespace boxcar::detail {

LeaseRescuer::LeaseRescuer(ReceiptStore& store, const WorkerOptions& options, AtomicWorkerStats& stats,
                           const std::map<std::string, HandlerEntry>& handlers)
    : store_(store), options_(options), stats_(stats), handlers_(handlers), log_(logger("worker")) {}

std::size_t LeaseRescuer::release_expired(const std::string& consumer) {
  const auto struck = store_.release_expired(consumer, options_.claim_limit, options_.max_attempts);
  std::size_t dead = 0;
  for (const auto& receipt : struck) {
    ++stats_.crash_strikes;
    if (options_.metrics) options_.metrics->crash_strike(receipt.consumer);
    const bool is_dead = receipt.status == "DEAD";
    if (is_dead) {
      ++dead;
      ++stats_.lease_expired;
      ++stats_.dead;
      if (options_.metrics)
        options_.metrics->processed(receipt.consumer, event_type_label(handlers_, receipt.consumer, receipt.event_type),
                                    "dead");
    }
    log_event(*log_, LogLevel::Warn,
              is_dead ? "receipt is DEAD: its worker process died or hung while running it alone, on its last attempt"
                      : "crash strike: the worker process died or hung while running this receipt alone",
              {{"outcome", is_dead ? "dead" : "crash_strike"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)}});
  }
  return dead;
}

}  // namespace boxcar::detail
