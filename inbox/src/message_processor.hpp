// Runs claimed receipts through their handlers: the transaction per message (or per
// batch), the deadline, and the recording of every outcome.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include <spdlog/fwd.h>

#include "boxcar/inbox/detail/error_text.hpp"
#include "boxcar/inbox/worker.hpp"
#include "claimed_receipt.hpp"
#include "boxcar/inbox/detail/deadline_watchdog.hpp"
#include "in_flight_registry.hpp"
#include "outage_probe.hpp"
#include "receipt_store.hpp"

namespace boxcar::detail {

struct AtomicWorkerStats {
  std::atomic<std::uint64_t> claimed{0}, completed{0}, retried{0}, dead{0}, stale{0}, unsupported{0}, lease_expired{0},
      handed_back{0}, handler_calls{0}, crash_strikes{0}, infrastructure_retries{0};
  WorkerStats snapshot() const;
};

struct HandlerEntry {
  /// The plain handler; for a batch consumer, its optional per-message fallback.
  std::shared_ptr<InboxHandler> handler;
  std::vector<EventVersion> supports;
  /// Set for a batch consumer (docs/worker.md, "Batch handlers").
  std::shared_ptr<InboxBatchHandler> batch_handler{};
  bool supports_pair(const std::string& event_type, int schema_version) const;
};

/// The event_type label value for event types no handler of the consumer lists.
inline constexpr const char* kUnsupportedEventTypeLabel = "(unsupported)";

/// The event_type label of boxcar_inbox_processed_total: `event_type` when the handler of
/// `consumer` lists it in its supports (any schema version), else "(unsupported)". Senders
/// choose event types; labels come only from configuration, so random types cannot grow
/// the number of series (docs/security.md, section 5). Returns `event_type` or a static.
const std::string& event_type_label(const std::map<std::string, HandlerEntry>& handlers, const std::string& consumer,
                                    const std::string& event_type);

class MessageProcessor {
 public:
  MessageProcessor(std::shared_ptr<ConnectionPool> pool, ReceiptStore& store,
                   std::map<std::string, HandlerEntry> handlers, const WorkerOptions& options, AtomicWorkerStats& stats,
                   InFlightRegistry& in_flight);

  /// Processes `batch` (claimed by this worker) and records each outcome. Never throws.
  void process(std::vector<ClaimedReceipt>& batch, DeadlineWatchdog& watchdog);

 private:
  void process_one(const ClaimedReceipt& receipt, DeadlineWatchdog& watchdog);
  /// Plain handlers: one message, or a batch through process_batch().
  void process_plain(std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);
  /// Batch handlers (batch_handler_processor.cpp): `receipts` are of one consumer (and,
  /// with worker.tenant_setting, one scope); one handle_batch() call in one transaction.
  void process_handler_batch(const std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);
  /// After a batch handler threw (or ran past its deadline): each message alone, through
  /// the fallback handler or a one-message batch, renewing the waiting leases before each.
  void rerun_handler_batch_singly(const std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);
  void process_batch(std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);
  /// After a batch rolled back: each receipt in its own transaction, in order, renewing
  /// the leases of those still waiting before each.
  void rerun_one_by_one(const std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog);
  void invoke(const ClaimedReceipt& receipt, Tx& tx, std::chrono::steady_clock::time_point deadline,
              const CancellationSignal& signal);
  /// Records the failure in its own statement, then reports it.
  void record_failure(const ClaimedReceipt& receipt, FailureRecord failure);
  /// Stats, metric and log of a recorded failure whose write returned `status`
  /// (nullopt: the claim was stale). Batched savepoint mode calls it only after commit.
  void report_failure(const ClaimedReceipt& receipt, const FailureRecord& failure,
                      const std::optional<std::string>& status);
  void report_stale(const ClaimedReceipt& receipt, const char* what);
  /// The database failed (`error`) before any handler of `receipts` ran: gives their
  /// claims back without spending the attempt, due after a backoff, and counts them in
  /// boxcar_worker_infrastructure_retries_total. Never throws.
  void give_back_unstarted(std::span<const ClaimedReceipt* const> receipts, std::exception_ptr error);
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
  /// Judges `error`, which failed `receipt`'s own transaction (it ran alone in it) after
  /// its handler started and before the deadline: docs/worker.md, "Infrastructure
  /// failures are not attempts". Runs the outage probe when the SQLSTATE asks for one.
  /// Never throws.
  StartedFailure hand_back_if_outage(const ClaimedReceipt& receipt, std::exception_ptr error);
  /// The note that goes before the error of an attempt charged after the outage bound.
  std::string outage_bound_note() const;
  /// True when a handler ended `tx` (raw COMMIT/ROLLBACK/END); false when it is still
  /// the database transaction `xact_id` or cannot be asked (aborted, connection lost).
  bool ended_by_handler(Tx& tx, const std::string& xact_id) noexcept;
  FailureRecord describe_current_exception(const ClaimedReceipt& receipt,
                                           std::chrono::steady_clock::time_point deadline) const;
  /// True for a receipt whose attempts lease recovery exhausted (claimed DEAD): records
  /// its outcome; it needs no handler call.
  bool exhausted_by_lease_recovery(const ClaimedReceipt& receipt);
  /// Whether the receipt's consumer has a handler that supports its event type and version.
  bool supported(const ClaimedReceipt& receipt) const;
  /// Makes the receipts DEAD with UNSUPPORTED_EVENT, all in one transaction, and records
  /// their outcomes once it committed. Never throws: on failure they stay claimed.
  void dead_letter_unsupported(std::span<const ClaimedReceipt* const> receipts);
  /// boxcar_inbox_processed_total for one receipt's outcome.
  void observe(const ClaimedReceipt& receipt, std::string_view outcome) const;

  std::shared_ptr<ConnectionPool> pool_;
  ReceiptStore& store_;
  std::map<std::string, HandlerEntry> handlers_;
  const WorkerOptions& options_;
  AtomicWorkerStats& stats_;
  InFlightRegistry& in_flight_;
  OutageProbe probe_;
  std::shared_ptr<spdlog::logger> log_;
};

}  // namespace boxcar::detail
