// The handler transaction of one message: lock under the claim token, handle, complete,
// commit — or roll back and have the failure recorded, guarded by the same token.
#include "message_processor.hpp"

#include <algorithm>

#include <pqxx/pqxx>

#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/error.hpp"
#include "handler_run.hpp"
#include "tenant_setting.hpp"

namespace boxcar::detail {

WorkerStats AtomicWorkerStats::snapshot() const {
  WorkerStats s{claimed.load(),     completed.load(),     retried.load(),     dead.load(),         stale.load(),
                unsupported.load(), lease_expired.load(), handed_back.load(), handler_calls.load()};
  s.crash_strikes = crash_strikes.load();
  s.infrastructure_retries = infrastructure_retries.load();
  return s;
}

bool HandlerEntry::supports_pair(const std::string& event_type, int schema_version) const {
  for (const auto& pair : supports)
    if (pair.event_type == event_type && pair.schema_version == schema_version) return true;
  return false;
}

const std::string& event_type_label(const std::map<std::string, HandlerEntry>& handlers, const std::string& consumer,
                                    const std::string& event_type) {
  static const std::string unsupported = kUnsupportedEventTypeLabel;
  const auto it = handlers.find(consumer);
  if (it == handlers.end()) return unsupported;
  for (const auto& pair : it->second.supports)
    if (pair.event_type == event_type) return event_type;
  return unsupported;
}

MessageProcessor::MessageProcessor(std::shared_ptr<ConnectionPool> pool, ReceiptStore& store,
                                   std::map<std::string, HandlerEntry> handlers, const WorkerOptions& options,
                                   AtomicWorkerStats& stats, InFlightRegistry& in_flight)
    : pool_(std::move(pool)),
      store_(store),
      handlers_(std::move(handlers)),
      options_(options),
      stats_(stats),
      in_flight_(in_flight),
      outcomes_(pool_, store_, handlers_, options_, stats_) {}

void MessageProcessor::process(std::vector<ClaimedReceipt>& batch, DeadlineWatchdog& watchdog) {
  std::vector<const ClaimedReceipt*> runnable;
  // Batch handlers get messages of one consumer per call, and with worker.tenant_setting
  // of one scope, so the setting holds for the whole call: grouped here, in claim order.
  std::vector<std::vector<const ClaimedReceipt*>> handler_batches;
  std::vector<const ClaimedReceipt*> unsupported;
  for (const auto& receipt : batch) {
    if (outcomes_.exhausted_by_lease_recovery(receipt)) continue;
    if (!supported(receipt)) {
      unsupported.push_back(&receipt);
      continue;
    }
    if (!handlers_.at(receipt.consumer).batch_handler) {
      runnable.push_back(&receipt);
      continue;
    }
    const auto group = std::find_if(handler_batches.begin(), handler_batches.end(), [&](const auto& g) {
      return g.front()->consumer == receipt.consumer &&
             (options_.tenant_setting.empty() || g.front()->scope == receipt.scope);
    });
    if (group == handler_batches.end()) {
      handler_batches.push_back({&receipt});
    } else {
      group->push_back(&receipt);
    }
  }
  outcomes_.dead_letter_unsupported(unsupported);
  for (const auto& group : handler_batches) process_handler_batch(group, watchdog);
  process_plain(runnable, watchdog);
}

void MessageProcessor::process_plain(std::vector<const ClaimedReceipt*>& runnable, DeadlineWatchdog& watchdog) {
  if (runnable.size() == 1 || (options_.batch_size <= 1 && !runnable.empty())) {
    for (const auto* receipt : runnable) process_one(*receipt, watchdog);
  } else if (!runnable.empty()) {
    process_batch(runnable, watchdog);
  }
}

bool MessageProcessor::supported(const ClaimedReceipt& receipt) const {
  const auto it = handlers_.find(receipt.consumer);
  return it != handlers_.end() && it->second.supports_pair(receipt.event_type, receipt.schema_version);
}

void MessageProcessor::invoke(const ClaimedReceipt& receipt, Tx& tx, Clock::time_point deadline,
                              const CancellationSignal& signal) {
  HandlerContext context{.tx = tx,
                         .scope = receipt.scope,
                         .source = receipt.source,
                         .consumer = receipt.consumer,
                         .message_id = receipt.message_id,
                         .event_type = receipt.event_type,
                         .schema_version = receipt.schema_version,
                         .attempt = receipt.attempt,
                         .metadata = receipt.metadata,
                         .deadline = deadline,
                         .signal = signal};
  ++stats_.handler_calls;
  const HandlerTimer timer(options_.metrics, receipt.consumer);
  // Before each handler, also within a batch: every handler sees its own message's tenant.
  set_tenant(tx, options_.tenant_setting, receipt.scope);
  handlers_.at(receipt.consumer).handler->handle(receipt.payload, context);
}

bool MessageProcessor::ended_by_handler(Tx& tx, const std::string& xact_id) noexcept {
  try {
    return store_.transaction_ended(tx, xact_id);
  } catch (...) {
    // The statement failed: the transaction is aborted (still open, so not ended by a
    // handler) or the connection is gone. Either way it rolls back as a whole.
    return false;
  }
}

void MessageProcessor::process_one(const ClaimedReceipt& receipt, DeadlineWatchdog& watchdog) {
  Attempt attempt{.deadline = Clock::now() + options_.handler_timeout};
  try {
    run_one(receipt, attempt, watchdog);
  } catch (...) {
    // The handler's transaction is gone (rolled back) before the failure is recorded.
    fail_one(receipt, attempt, std::current_exception());
  }
}

void MessageProcessor::run_one(const ClaimedReceipt& receipt, Attempt& attempt, DeadlineWatchdog& watchdog) {
  // A suspect's solo start is durable before its transaction begins: only a lease that
  // expires after it is a crash strike (docs/worker.md).
  if (receipt.suspect && !store_.start_solo(receipt)) {
    outcomes_.stale(receipt, "claim went stale before the handler ran");
    return;
  }
  // LoanUse::Application: the handler runs on it, so its session is reset afterwards.
  Tx tx = pool_->begin(LoanUse::Application);
  const auto locked = store_.lock(tx, receipt, ReceiptStore::TransactionDeadline::until(attempt.deadline));
  if (!locked) {
    outcomes_.stale(receipt, "claim went stale before the handler ran");
    return;
  }
  attempt.handler_started = true;
  const auto completion = handle_and_complete(receipt, tx, *locked, attempt, watchdog);
  if (completion.receipts.empty()) {
    // Rolled back (Tx's destructor): docs/worker.md, a guard that matches no row.
    outcomes_.stale(receipt, "completion found the claim stale; the attempt rolled back");
    return;
  }
  commit_one(receipt, tx, completion);
}

ReceiptStore::Completion MessageProcessor::handle_and_complete(const ClaimedReceipt& receipt, Tx& tx,
                                                               const ReceiptStore::LockedReceipt& locked,
                                                               Attempt& attempt, DeadlineWatchdog& watchdog) {
  const std::string& xact_id = locked.xact_id;
  try {
    {
      const RunningHandlers running(in_flight_, watchdog, attempt.source, tx, locked.session, attempt.deadline,
                                    &attempt.abandoned);
      invoke(receipt, tx, attempt.deadline, attempt.source.signal());
    }
    if (Clock::now() >= attempt.deadline) throw HandlerTimeout("the handler returned after its deadline");
    auto completion = store_.complete(tx, receipt, xact_id);
    if (completion.receipts.empty() && store_.transaction_ended(tx, xact_id))
      throw HandlerEndedTransaction(kEndedTransactionText);
    return completion;
  } catch (const HandlerEndedTransaction&) {
    throw;
  } catch (const std::exception& e) {
    // A handler that ended the transaction and then failed is still one whose writes may
    // have committed: the same DEAD, with the failure it ended in.
    if (ended_by_handler(tx, xact_id))
      throw HandlerEndedTransaction(std::string(kEndedTransactionText) +
                                    " (then it failed: " + demangled_type(typeid(e)) + ": " + e.what() + ")");
    throw;
  } catch (...) {
    if (ended_by_handler(tx, xact_id)) throw HandlerEndedTransaction(kEndedTransactionText);
    throw;
  }
}

void MessageProcessor::commit_one(const ClaimedReceipt& receipt, Tx& tx, const ReceiptStore::Completion& completion) {
  BOXCAR_FAILPOINT("worker.before_commit");
  try {
    tx.commit_and_reset_session();
  } catch (const DatabaseError& e) {
    if (!e.uncertain()) throw;
    // Committed or not, the row tells: COMPLETED, or PROCESSING until its lease expires.
    outcomes_.commit_uncertain(receipt, 1, e.what());
    return;
  }
  BOXCAR_FAILPOINT("worker.after_commit");
  outcomes_.completed(receipt, completion.receipts.front().second);
}

void MessageProcessor::fail_one(const ClaimedReceipt& receipt, const Attempt& attempt, std::exception_ptr error) {
  if (!attempt.handler_started) {
    const ClaimedReceipt* unstarted[] = {&receipt};
    outcomes_.give_back_unstarted(unstarted, error);
    return;
  }
  // Past the deadline the session may have been ended by the deadline itself
  // (idle_in_transaction_session_timeout): that looks like a lost connection, but it is
  // the handler's timeout, an attempt; so is an attempt the supervisor abandoned (and
  // whose session it terminated).
  auto judged = OutcomeRecorder::StartedFailure::Charge;
  if (!attempt.abandoned && Clock::now() < attempt.deadline) judged = outcomes_.hand_back_if_outage(receipt, error);
  if (judged == OutcomeRecorder::StartedFailure::HandedBack) return;
  outcomes_.record_failure(receipt, outcomes_.describe_judged(error, receipt, attempt.deadline, judged));
}

}  // namespace boxcar::detail
