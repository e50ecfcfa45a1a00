// What every outcome of an attempt writes and reports, the worker's completer side: a
// completion's stats and metrics, a failure's RETRYABLE or DEAD (guarded by the claim
// token), a stale claim, claims given back because the database failed, and the judgement
// of an error that looks like a database outage (docs/worker.md, "Failures",
// "Infrastructure failures are not attempts").
#pragma once

#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include <spdlog/fwd.h>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/inbox/worker.hpp"
#include "claimed_receipt.hpp"
#include "outage_probe.hpp"
#include "receipt_store.hpp"
#include "handler_entry.hpp"
#include "worker_stats.hpp"

namespace boxcar::detail {

class OutcomeRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  /// What became of an attempt's failure after its handler started.
  enum class StartedFailure {
    /// The failure is the handler's (no outage SQLSTATE, or the probe found the database
    /// up): charge it.
    Charge,
    /// A probe confirmed the outage, but the receipt had had worker.max_outage_hand_backs
    /// uncharged hand-backs already (or its claim went stale): charge it.
    ChargeAfterOutageBound,
    /// A probe confirmed the outage: the claim went back unspent (or, when even that
    /// failed, waits for lease recovery, which gives it back too).
    HandedBack,
  };

  /// `handlers` (the worker's, outliving the recorder) bound the metrics' event_type label.
  OutcomeRecorder(std::shared_ptr<ConnectionPool> pool, ReceiptStore& store,
                  const std::map<std::string, HandlerEntry>& handlers, const WorkerOptions& options,
                  AtomicWorkerStats& stats);

  /// A committed completion: stats, metrics (the age since accept) and log.
  void completed(const ClaimedReceipt& receipt, double age_seconds);
  /// The completions of a committed batch, `completed` as its statement returned them.
  void completed(std::span<const ClaimedReceipt* const> receipts,
                 const std::vector<std::pair<std::int64_t, double>>& completed);
  void stale(const ClaimedReceipt& receipt, const char* what);
  /// The COMMIT's answer was lost: the row tells whether it landed. Logged only.
  void commit_uncertain(const ClaimedReceipt& receipt, std::size_t messages, const std::string& error);
  /// Records the failure in its own statement, then reports it. Never throws: when the
  /// write fails the receipt stays PROCESSING and lease recovery retries it.
  void record_failure(const ClaimedReceipt& receipt, FailureRecord failure);
  /// Stats, metric and log of a recorded failure whose write returned `status` (nullopt:
  /// the claim was stale). Batched savepoint mode calls it only after commit.
  void report_failure(const ClaimedReceipt& receipt, const FailureRecord& failure,
                      const std::optional<std::string>& status);
  /// The database failed (`error`) before any handler of `receipts` ran: gives their
  /// claims back without spending the attempt, due after a backoff, and counts them in
  /// boxcar_worker_infrastructure_retries_total. Never throws.
  void give_back_unstarted(std::span<const ClaimedReceipt* const> receipts, std::exception_ptr error);
  /// Judges `error`, which failed `receipt`'s own transaction (it ran alone in it) after
  /// its handler started and before the deadline. Runs the outage probe when the SQLSTATE
  /// asks for one. Never throws.
  StartedFailure hand_back_if_outage(const ClaimedReceipt& receipt, std::exception_ptr error);
  /// The failure `error` is, for `receipt` whose deadline was `deadline` (late: a timeout).
  FailureRecord describe(std::exception_ptr error, const ClaimedReceipt& receipt, Clock::time_point deadline) const;
  /// describe(), with the outage bound's note when `judged` says it was reached.
  FailureRecord describe_judged(std::exception_ptr error, const ClaimedReceipt& receipt, Clock::time_point deadline,
                                StartedFailure judged) const;
  /// True for a receipt whose attempts lease recovery exhausted (claimed DEAD): records
  /// its outcome; it needs no handler call.
  bool exhausted_by_lease_recovery(const ClaimedReceipt& receipt);
  /// Makes the receipts DEAD with UNSUPPORTED_EVENT, all in one transaction, and records
  /// their outcomes once it committed. Never throws: on failure they stay claimed.
  void dead_letter_unsupported(std::span<const ClaimedReceipt* const> receipts);
  /// boxcar_inbox_processed_total for one receipt's outcome.
  void observe(const ClaimedReceipt& receipt, std::string_view outcome) const;

 private:
  std::shared_ptr<ConnectionPool> pool_;
  ReceiptStore& store_;
  const std::map<std::string, HandlerEntry>& handlers_;
  const WorkerOptions& options_;
  AtomicWorkerStats& stats_;
  OutageProbe probe_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace boxcar::detail
