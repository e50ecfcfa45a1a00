// Lease recovery for when the worker has no room to take work: the dispatcher normally
// re-claims expired leases into its local queue, but a full queue must not stop recovery,
// or receipts out of attempts would never become DEAD and other workers would wait for
// leases only this one would take back.
#pragma once

#include <memory>
#include <string>

#include <spdlog/fwd.h>

#include "boxcar/inbox/worker.hpp"
#include "message_processor.hpp"
#include "receipt_store.hpp"

namespace boxcar::detail {

class LeaseRescuer {
 public:
  LeaseRescuer(ReceiptStore& store, const WorkerOptions& options, AtomicWorkerStats& stats);

  /// Returns up to claim_limit expired leases of `consumer` to RETRYABLE (due now, for
  /// any worker with room) or makes them DEAD when out of attempts, and records the DEAD
  /// outcomes (stats, metrics, log). Returns how many became DEAD.
  /// @throws DatabaseError and pqxx errors from the statement (the dispatcher retries).
  std::size_t release_expired(const std::string& consumer);

 private:
  ReceiptStore& store_;
  const WorkerOptions& options_;
  AtomicWorkerStats& stats_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace boxcar::detail
