// Lease recovery, the worker's rescuer: every expired claim of an owned consumer goes
// back to the queue as a suspect (docs/worker.md, "Attempt accounting and the suspect
// lane"). It never re-claims, so it runs however full the local queue is: receipts out of
// attempts still become DEAD, and other workers need not wait for leases only this one
// would take back.
#pragma once

#include <map>
#include <memory>
#include <string>

#include <spdlog/fwd.h>

#include "boxcar/inbox/worker.hpp"
#include "handler_entry.hpp"
#include "worker_stats.hpp"
#include "receipt_store.hpp"

namespace boxcar::detail {

class LeaseRescuer {
 public:
  /// `handlers` (the worker's, outliving the rescuer) bound the metrics' event_type label.
  LeaseRescuer(ReceiptStore& store, const WorkerOptions& options, AtomicWorkerStats& stats,
               const std::map<std::string, HandlerEntry>& handlers);

  /// Releases up to claim_limit expired leases of `consumer` as suspects, due now for the
  /// suspect lane of any worker: a crash strike when the claim's solo run had started
  /// (DEAD when that was its last attempt), else without spending the attempt. Records
  /// strikes and DEAD outcomes (stats, metrics, log). Returns how many became DEAD.
  /// @throws DatabaseError and pqxx errors from the statement (the dispatcher retries).
  std::size_t release_expired(const std::string& consumer);

 private:
  ReceiptStore& store_;
  const WorkerOptions& options_;
  AtomicWorkerStats& stats_;
  const std::map<std::string, HandlerEntry>& handlers_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace boxcar::detail
