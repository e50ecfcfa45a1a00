// Plain handlers in batches (batch_size > 1; docs/worker.md, "Batched mode"): one
// transaction locks the batch under its claim tokens, runs each message's handler (inside
// a savepoint in Savepoint mode), completes the messages that succeeded with one guarded
// statement and commits. A batch that cannot commit as a whole is re-run one message per
// transaction, so a message is charged only for a failure of its own.
#include <algorithm>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/logging.hpp"
#include "handler_run.hpp"
#include "infrastructure_failure.hpp"
#include "message_processor.hpp"
#include "tenant_setting.hpp"

namespace boxcar::detail {

struct MessageProcessor::BatchRun {
  std::vector<const ClaimedReceipt*>& receipts;
  Attempt attempt;
  /// The receipts still claimed under their tokens when the batch locked them.
  std::vector<const ClaimedReceipt*> locked{};
  /// How many handlers were called (in `locked` order), and those that returned.
  std::size_t invoked = 0;
  std::vector<const ClaimedReceipt*> succeeded{};
  /// Savepoint mode: failures recorded in this transaction, reported once it commits.
  struct RecordedFailure {
    const ClaimedReceipt* receipt;
    FailureRecord failure;
    std::optional<std::string> status;
  };
  std::vector<RecordedFailure> failed{};
  /// To run again one message per transaction once the batch rolled back.
  std::vector<const ClaimedReceipt*> rerun{};
};

void MessageProcessor::process_batch(std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog) {
  BatchRun run{.receipts = receipts, .attempt = {.deadline = Clock::now() + options_.handler_timeout}};
  try {
    run_batch(run, watchdog);
  } catch (...) {
    // Rolled back as a whole: nothing of this batch committed through the worker.
    fail_batch(run, std::current_exception());
  }
  if (!run.rerun.empty()) rerun_one_by_one(run.rerun, watchdog);
}

void MessageProcessor::run_batch(BatchRun& run, DeadlineWatchdog& watchdog) {
  Tx tx = pool_->begin(LoanUse::Application);  // handlers run on it: reset afterwards
  const auto lock = store_.lock_many(tx, run.receipts, ReceiptStore::TransactionDeadline::until(run.attempt.deadline));
  for (const auto* r : run.receipts) {
    if (std::find(lock.ids.begin(), lock.ids.end(), r->id) != lock.ids.end()) {
      run.locked.push_back(r);
    } else {
      ++stats_.stale;
      outcomes_.observe(*r, "stale");
    }
  }
  if (run.locked.empty()) return;
  std::vector<std::pair<std::int64_t, double>> completed;
  try {
    run_batch_handlers(run, tx, lock, watchdog);
    if (Clock::now() >= run.attempt.deadline) throw HandlerTimeout("the batch returned after its deadline");
    // Work a handler deferred to COMMIT (deferred triggers) must not run as the last
    // handler's tenant: it sees no tenant, so tenant policies fail closed.
    set_tenant(tx, options_.tenant_setting, Scope::global());
    if (!run.succeeded.empty()) completed = store_.complete_many(tx, run.succeeded, lock.xact_id).receipts;
    if (completed.size() < run.succeeded.size() && store_.transaction_ended(tx, lock.xact_id))
      throw HandlerEndedTransaction(kEndedBatchText);
  } catch (const HandlerEndedTransaction&) {
    throw;
  } catch (...) {
    if (ended_by_handler(tx, lock.xact_id)) throw HandlerEndedTransaction(kEndedBatchText);
    throw;
  }
  if (completed.size() < run.succeeded.size()) {
    // A completion guard matched no row: as in single-message mode, nothing of the
    // attempt commits (docs/worker.md). The stale receipts belong to whoever holds their
    // claim now; the others are re-run one per transaction.
    tx.rollback();
    for (const auto* r : run.locked) {
      const bool stale = std::find(run.succeeded.begin(), run.succeeded.end(), r) != run.succeeded.end() &&
                         std::find_if(completed.begin(), completed.end(),
                                      [&](const auto& c) { return c.first == r->id; }) == completed.end();
      if (stale) {
        outcomes_.stale(*r, "completion found the claim stale; the whole batch rolled back");
      } else {
        run.rerun.push_back(r);
      }
    }
    return;
  }
  tx.commit_and_reset_session();
  outcomes_.completed(run.succeeded, completed);
  for (const auto& f : run.failed) outcomes_.report_failure(*f.receipt, f.failure, f.status);
}

void MessageProcessor::run_batch_handlers(BatchRun& run, Tx& tx, const ReceiptStore::LockedBatch& lock,
                                          DeadlineWatchdog& watchdog) {
  const RunningHandlers running(in_flight_, watchdog, run.attempt.source, tx, lock.session, run.attempt.deadline,
                                &run.attempt.abandoned);
  const bool savepoints = options_.batch_failure_mode == BatchFailureMode::Savepoint;
  // One round trip between two handlers: release the previous savepoint and open the next
  // in one simple query. COMMIT releases the last one.
  bool savepoint_open = false;
  for (const auto* r : run.locked) {
    if (savepoints) {
      tx.work().exec(savepoint_open ? "RELEASE SAVEPOINT boxcar_message; SAVEPOINT boxcar_message"
                                    : "SAVEPOINT boxcar_message");
      savepoint_open = true;
    }
    // The handler's after-commit callbacks (NOTIFY, emitted_total) belong to its
    // savepoint: a rollback to it drops them.
    const auto callbacks = tx.on_commit_mark();
    ++run.invoked;
    try {
      invoke(*r, tx, run.attempt.deadline, run.attempt.source.signal());
      run.succeeded.push_back(r);
    } catch (...) {
      // An error that looks like a database outage breaks the batch as a whole: each
      // message then runs alone, and only a probe decides whether its own failure is an
      // outage.
      if (!savepoints || Clock::now() >= run.attempt.deadline ||
          classify_infrastructure_failure(std::current_exception()).probe != OutageProbeKind::None)
        throw;
      FailureRecord failure = outcomes_.describe(std::current_exception(), *r, run.attempt.deadline);
      // Throws when the transaction itself is broken: then the batch fails as a whole.
      tx.work().exec("ROLLBACK TO SAVEPOINT boxcar_message");
      tx.drop_on_commit_since(callbacks);
      auto status = store_.fail(&tx, *r, failure, options_.max_attempts);
      run.failed.push_back({r, std::move(failure), std::move(status)});
    }
    // Past the deadline the batch is over: the handlers after this one would start with
    // their signal already fired, and nothing of the batch may commit.
    if (Clock::now() >= run.attempt.deadline) throw HandlerTimeout("the batch ran past its deadline");
  }
}

void MessageProcessor::fail_batch(BatchRun& run, std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const HandlerEndedTransaction&) {
    // Every handler that ran may have written durably (before the end through its
    // COMMIT, after it in autocommit): DEAD, never retried. A handler that never ran is
    // re-run normally.
    const FailureRecord failure = outcomes_.describe(error, *run.receipts.front(), run.attempt.deadline);
    for (std::size_t i = 0; i < run.locked.size() && i < run.invoked; ++i)
      outcomes_.record_failure(*run.locked[i], failure);
    if (run.invoked < run.locked.size())
      run.rerun.assign(run.locked.begin() + static_cast<long>(run.invoked), run.locked.end());
    return;
  } catch (...) {
  }
  if (run.invoked == 0) {
    // No handler ran (the database failed first: pool, BEGIN, deadline, lock): nothing
    // committed, and no message is charged.
    using Receipts = std::span<const ClaimedReceipt* const>;
    outcomes_.give_back_unstarted(run.locked.empty() ? Receipts(run.receipts) : Receipts(run.locked), error);
    return;
  }
  // The batch's failure proves nothing about any one message: a batch past its deadline
  // (each may fit its deadline alone), an error that looks like a database outage (one
  // message's own statement, or the database: only a probe after a failure of its own can
  // tell), a failed handler in Rerun mode, or in Savepoint mode a failure of the
  // transaction itself (its recorded failures rolled back with it), such as a deferred
  // constraint one message violated at COMMIT. So the batch is re-run one message per
  // transaction, within the same claims. An abandoned thread is no longer the worker's: it
  // re-runs nothing, and the batch is recorded as timed out.
  if (!run.locked.empty() && !run.attempt.abandoned) {
    run.rerun = run.locked;
    return;
  }
  // The shared failure (timeout, lost connection) for every message of the batch.
  const FailureRecord batch_failure = outcomes_.describe(error, *run.receipts.front(), run.attempt.deadline);
  for (const auto* r : (run.locked.empty() ? run.receipts : run.locked)) {
    FailureRecord failure = batch_failure;
    failure.retry_delay = backoff_delay(options_.backoff, r->attempt);
    outcomes_.record_failure(*r, std::move(failure));
  }
}

void MessageProcessor::rerun_one_by_one(const std::vector<const ClaimedReceipt*>& receipts,
                                        DeadlineWatchdog& watchdog) {
  for (std::size_t i = 0; i < receipts.size(); ++i) {
    // The batch's row locks are gone, and the k-th message waits for k - 1 transactions of
    // up to a deadline each: renew the leases of those still waiting so none of them
    // expires before its own turn (docs/worker.md, "How long a claim is held").
    try {
      store_.renew_leases(std::span(receipts).subspan(i), options_.lease);
    } catch (const std::exception& e) {
      // The message transaction below fails the same way and records it.
      logger("worker")->warn("could not renew the leases of {} receipts of a batch: {}", receipts.size() - i, e.what());
    }
    process_one(*receipts[i], watchdog);
  }
}

}  // namespace boxcar::detail
