// Runs claimed receipts through their handlers, the worker's executor: the transaction per
// message (or per batch), the deadline, and the guarded completion that commits with the
// handler's writes. What each outcome then writes and reports is the OutcomeRecorder's.
#pragma once

#include <chrono>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "boxcar/core/cancellation.hpp"
#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/inbox/detail/deadline_watchdog.hpp"
#include "boxcar/inbox/worker.hpp"
#include "claimed_receipt.hpp"
#include "handler_entry.hpp"
#include "in_flight_registry.hpp"
#include "outcome_recorder.hpp"
#include "receipt_store.hpp"
#include "worker_stats.hpp"

namespace boxcar::detail {

class MessageProcessor {
 public:
  using Clock = std::chrono::steady_clock;

  MessageProcessor(std::shared_ptr<ConnectionPool> pool, ReceiptStore& store,
                   std::map<std::string, HandlerEntry> handlers, const WorkerOptions& options, AtomicWorkerStats& stats,
                   InFlightRegistry& in_flight);

  /// Processes `batch` (claimed by this worker) and records each outcome. Never throws.
  void process(std::vector<ClaimedReceipt>& batch, DeadlineWatchdog& watchdog);

  const std::map<std::string, HandlerEntry>& handlers() const { return handlers_; }

 private:
  /// One attempt of a message or a batch, as its failure path needs to judge it.
  struct Attempt {
    Clock::time_point deadline;
    CancellationSource source{};
    /// Until a handler is called, a failure is the database's, not an attempt.
    bool handler_started = false;
    /// The supervisor abandoned the attempt (and terminated its session): its failure is
    /// the handler's, whatever SQLSTATE the termination produced; its thread is no longer
    /// the worker's and runs nothing more.
    bool abandoned = false;
  };
  /// What a plain batch's transaction did before it ended, for what comes after it.
  struct BatchRun;

  // One message, one transaction (message_processor.cpp).
  void process_one(const ClaimedReceipt& receipt, DeadlineWatchdog& watchdog);
  /// Begin, lock under the claim token, handle, complete, commit, and report.
  void run_one(const ClaimedReceipt& receipt, Attempt& attempt, DeadlineWatchdog& watchdog);
  /// The handler on `tx` and the guarded completion; the completion matched no row when
  /// the claim went stale. Throws HandlerEndedTransaction for a handler that ended `tx`.
  ReceiptStore::Completion handle_and_complete(const ClaimedReceipt& receipt, Tx& tx,
                                               const ReceiptStore::LockedReceipt& locked, Attempt& attempt,
                                               DeadlineWatchdog& watchdog);
  void commit_one(const ClaimedReceipt& receipt, Tx& tx, const ReceiptStore::Completion& completion);
  /// The failure path of one message, its transaction gone (rolled back).
  void fail_one(const ClaimedReceipt& receipt, const Attempt& attempt, std::exception_ptr error);
  /// Plain handlers: one message, or a batch through process_batch().
  void process_plain(std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);

  // Plain handlers in batches (message_processor_batch.cpp).
  void process_batch(std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);
  /// The batch's transaction: lock, handlers (with savepoints in Savepoint mode), the
  /// guarded completion, and the commit or rollback. Throws what ends the batch.
  void run_batch(BatchRun& run, DeadlineWatchdog& watchdog);
  void run_batch_handlers(BatchRun& run, Tx& tx, const ReceiptStore::LockedBatch& lock, DeadlineWatchdog& watchdog);
  /// After run_batch() threw: what the batch does next (give back, re-run, record).
  void fail_batch(BatchRun& run, std::exception_ptr error);
  /// After a batch rolled back: each receipt in its own transaction, in order, renewing
  /// the leases of those still waiting before each.
  void rerun_one_by_one(const std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);

  // Batch handlers (batch_handler_processor.cpp): `receipts` are of one consumer (and,
  // with worker.tenant_setting, one scope); one handle_batch() call in one transaction.
  struct HandlerBatchRun;
  void process_handler_batch(const std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);
  /// Begin, lock, the handler, and the commit of its completions or the rollback that
  /// leaves failures and re-runs in `run`. Throws what ends the batch.
  void run_handler_batch(HandlerBatchRun& run, DeadlineWatchdog& watchdog);
  /// handle_batch() and, when every message completed, the guarded completion; returns the
  /// completed ids and ages (empty when some failed: those are in `run.failed`).
  std::vector<std::pair<std::int64_t, double>> handle_batch_and_complete(HandlerBatchRun& run, Tx& tx,
                                                                         const ReceiptStore::LockedBatch& lock,
                                                                         DeadlineWatchdog& watchdog);
  /// Splits handle_batch()'s outcomes: failures into `run.failed`, the completed returned.
  std::vector<const ClaimedReceipt*> sort_outcomes(HandlerBatchRun& run, const BatchOutcomes& outcomes);
  void fail_handler_batch(HandlerBatchRun& run, std::exception_ptr error, DeadlineWatchdog& watchdog);
  /// After a batch handler threw (or ran past its deadline): each message alone, through
  /// the fallback handler or a one-message batch, renewing the waiting leases before each.
  void rerun_handler_batch_singly(const std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);

  void invoke(const ClaimedReceipt& receipt, Tx& tx, Clock::time_point deadline, const CancellationSignal& signal);
  /// True when a handler ended `tx` (raw COMMIT/ROLLBACK/END); false when it is still
  /// the database transaction `xact_id` or cannot be asked (aborted, connection lost).
  bool ended_by_handler(Tx& tx, const std::string& xact_id) noexcept;
  /// Whether the receipt's consumer has a handler that supports its event type and version.
  bool supported(const ClaimedReceipt& receipt) const;

  std::shared_ptr<ConnectionPool> pool_;
  ReceiptStore& store_;
  std::map<std::string, HandlerEntry> handlers_;
  const WorkerOptions& options_;
  AtomicWorkerStats& stats_;
  InFlightRegistry& in_flight_;
  OutcomeRecorder outcomes_;
};

}  // namespace boxcar::detail
