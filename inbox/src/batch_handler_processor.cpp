// Batch handlers (docs/worker.md, "Batch handlers"): one handle_batch() call per
// transaction that locks every receipt under its claim token and completes, guarded by
// the same tokens, exactly the messages reported completed — or, when any message failed,
// commits nothing of the batch: the failures are recorded, and the messages reported
// completed run again without them.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/inbox/detail/error_text.hpp"
#include "handler_run.hpp"
#include "infrastructure_failure.hpp"
#include "message_processor.hpp"
#include "tenant_setting.hpp"

namespace boxcar::detail {
namespace {

// Thrown into the failure path when handle_batch() returned a number of outcomes other
// than the number of messages: a handler bug, treated like a throw.
struct BatchOutcomeMismatch : std::runtime_error {
  using std::runtime_error::runtime_error;
};

bool contains(const std::vector<std::int64_t>& ids, std::int64_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

std::vector<InboxMessage> messages_of(const std::vector<const ClaimedReceipt*>& receipts) {
  std::vector<InboxMessage> messages;
  messages.reserve(receipts.size());
  for (const auto* r : receipts)
    messages.push_back({.payload = r->payload,
                        .scope = r->scope,
                        .source = r->source,
                        .consumer = r->consumer,
                        .message_id = r->message_id,
                        .event_type = r->event_type,
                        .schema_version = r->schema_version,
                        .attempt = r->attempt,
                        .metadata = r->metadata});
  return messages;
}

}  // namespace

struct MessageProcessor::HandlerBatchRun {
  const std::vector<const ClaimedReceipt*>& receipts;
  const HandlerEntry& entry;
  Attempt attempt;
  /// The receipts still claimed under their tokens when the batch locked them.
  std::vector<const ClaimedReceipt*> locked{};
  /// After the transaction rolled back: failures to record, and messages to run again.
  std::vector<std::pair<const ClaimedReceipt*, FailureRecord>> failed{};
  std::vector<const ClaimedReceipt*> again{};
};

void MessageProcessor::process_handler_batch(const std::vector<const ClaimedReceipt*>& receipts,
                                             DeadlineWatchdog& watchdog) {
  if (receipts.empty()) return;
  HandlerBatchRun run{.receipts = receipts,
                      .entry = handlers_.at(receipts.front()->consumer),
                      .attempt = {.deadline = Clock::now() + options_.handler_timeout}};
  try {
    run_handler_batch(run, watchdog);
  } catch (...) {
    fail_handler_batch(run, std::current_exception(), watchdog);
    return;
  }
  // Rolled back as a whole (or nothing to do). Failures first, each charged its own
  // attempt; then the messages reported completed run again without them.
  for (auto& [r, failure] : run.failed) outcomes_.record_failure(*r, std::move(failure));
  if (run.again.empty()) return;
  try {
    // Their row locks are gone; a lease must not expire before the re-run commits.
    store_.renew_leases(run.again, options_.lease);
  } catch (const std::exception& e) {
    logger("worker")->warn("could not renew the leases of {} receipts of a batch: {}", run.again.size(), e.what());
  }
  process_handler_batch(run.again, watchdog);
}

void MessageProcessor::run_handler_batch(HandlerBatchRun& run, DeadlineWatchdog& watchdog) {
  // A suspect runs alone (the suspect lane hands it over by itself), its solo start
  // durable before its transaction begins, as in single-message mode.
  if (run.receipts.size() == 1 && run.receipts.front()->suspect && !store_.start_solo(*run.receipts.front())) {
    outcomes_.stale(*run.receipts.front(), "claim went stale before the handler ran");
    return;
  }
  Tx tx = pool_->begin(LoanUse::Application);  // the handler runs on it: reset afterwards
  const auto lock = store_.lock_many(tx, run.receipts, ReceiptStore::TransactionDeadline::until(run.attempt.deadline));
  for (const auto* r : run.receipts) {
    if (contains(lock.ids, r->id)) {
      run.locked.push_back(r);
    } else {
      outcomes_.stale(*r, "claim went stale before the handler ran");
    }
  }
  if (run.locked.empty()) return;
  const auto completed = handle_batch_and_complete(run, tx, lock, watchdog);
  if (!run.failed.empty()) {
    // The handler wrote in bulk: its rows for the failed messages cannot be told apart
    // from the others', so nothing of the batch commits (emits and their on-commit
    // callbacks included).
    tx.rollback();
  } else if (completed.size() < run.locked.size()) {
    // A completion guard matched no row: as in single-message mode, nothing of the attempt
    // commits. The stale receipts belong to whoever holds their claim now; the others run
    // again without them.
    tx.rollback();
    for (const auto* r : run.locked) {
      if (std::find_if(completed.begin(), completed.end(), [&](const auto& c) { return c.first == r->id; }) ==
          completed.end()) {
        outcomes_.stale(*r, "completion found the claim stale; the whole batch rolled back");
      } else {
        run.again.push_back(r);
      }
    }
  } else {
    BOXCAR_FAILPOINT("worker.before_commit");
    try {
      tx.commit_and_reset_session();
    } catch (const DatabaseError& e) {
      if (!e.uncertain()) throw;
      outcomes_.commit_uncertain(*run.locked.front(), run.locked.size(), e.what());
      return;
    }
    BOXCAR_FAILPOINT("worker.after_commit");
    outcomes_.completed(run.locked, completed);
  }
}

std::vector<std::pair<std::int64_t, double>> MessageProcessor::handle_batch_and_complete(
    HandlerBatchRun& run, Tx& tx, const ReceiptStore::LockedBatch& lock, DeadlineWatchdog& watchdog) {
  const std::vector<InboxMessage> messages = messages_of(run.locked);
  try {
    BatchOutcomes outcomes;
    {
      const RunningHandlers running(in_flight_, watchdog, run.attempt.source, tx, lock.session, run.attempt.deadline,
                                    &run.attempt.abandoned);
      // One scope per call when the setting is configured (process() groups by it).
      set_tenant(tx, options_.tenant_setting, run.locked.front()->scope);
      BatchContext context{.tx = tx, .deadline = run.attempt.deadline, .signal = run.attempt.source.signal()};
      run.attempt.handler_started = true;
      ++stats_.handler_calls;
      const HandlerTimer timer(options_.metrics, run.locked.front()->consumer);
      outcomes = run.entry.batch_handler->handle_batch(messages, context);
    }
    if (Clock::now() >= run.attempt.deadline) throw HandlerTimeout("the batch handler returned after its deadline");
    if (outcomes.size() != run.locked.size())
      throw BatchOutcomeMismatch("handle_batch returned " + std::to_string(outcomes.size()) + " outcomes for " +
                                 std::to_string(run.locked.size()) + " messages");
    std::vector<const ClaimedReceipt*> reported_completed = sort_outcomes(run, outcomes);
    if (!run.failed.empty()) {
      // The failures are recorded after the rollback; a handler that ended the
      // transaction may have made its writes durable, which no retry may repeat.
      if (store_.transaction_ended(tx, lock.xact_id)) throw HandlerEndedTransaction(kEndedBatchText);
      run.again = std::move(reported_completed);
      return {};
    }
    // Work the handler deferred to COMMIT must not run as the batch's tenant.
    set_tenant(tx, options_.tenant_setting, Scope::global());
    auto completed = store_.complete_many(tx, run.locked, lock.xact_id).receipts;
    if (completed.size() < run.locked.size() && store_.transaction_ended(tx, lock.xact_id))
      throw HandlerEndedTransaction(kEndedBatchText);
    return completed;
  } catch (const HandlerEndedTransaction&) {
    throw;
  } catch (...) {
    if (ended_by_handler(tx, lock.xact_id)) throw HandlerEndedTransaction(kEndedBatchText);
    throw;
  }
}

std::vector<const ClaimedReceipt*> MessageProcessor::sort_outcomes(HandlerBatchRun& run,
                                                                   const BatchOutcomes& outcomes) {
  std::vector<const ClaimedReceipt*> reported_completed;
  for (std::size_t i = 0; i < run.locked.size(); ++i) {
    const auto& outcome = outcomes[i];
    if (outcome.kind() == MessageOutcome::Kind::Completed) {
      reported_completed.push_back(run.locked[i]);
      continue;
    }
    run.failed.emplace_back(run.locked[i],
                            FailureRecord{.permanent = outcome.kind() == MessageOutcome::Kind::Permanent,
                                          .dead_reason = "HANDLER_PERMANENT",
                                          .error_type = bounded_error_text(outcome.error_type(), 200),
                                          .message = bounded_error_text(outcome.error(), options_.max_error_bytes),
                                          .retry_delay = backoff_delay(options_.backoff, run.locked[i]->attempt)});
  }
  return reported_completed;
}

void MessageProcessor::fail_handler_batch(HandlerBatchRun& run, std::exception_ptr error, DeadlineWatchdog& watchdog) {
  try {
    std::rethrow_exception(error);
  } catch (const HandlerEndedTransaction&) {
    // Every message of the batch may have had writes made durable by the handler's end of
    // the transaction: none is retried.
    const FailureRecord failure = outcomes_.describe(error, *run.locked.front(), run.attempt.deadline);
    for (const auto* r : run.locked) outcomes_.record_failure(*r, failure);
    return;
  } catch (...) {
  }
  if (!run.attempt.handler_started) {
    // No handler ran (the database failed first): nothing committed, and no message is
    // charged.
    using Receipts = std::span<const ClaimedReceipt* const>;
    outcomes_.give_back_unstarted(run.locked.empty() ? Receipts(run.receipts) : Receipts(run.locked), error);
    return;
  }
  const bool looks_like_outage = classify_infrastructure_failure(error).probe != OutageProbeKind::None;
  // A one-message batch has failed on its own. An error that looks like a database outage
  // is judged by the probe (docs/worker.md, "Infrastructure failures are not attempts");
  // any other failure runs again through the fallback when one is registered.
  if (run.locked.size() == 1 && !run.attempt.abandoned && (looks_like_outage || !run.entry.handler)) {
    const ClaimedReceipt& r = *run.locked.front();
    auto judged = OutcomeRecorder::StartedFailure::Charge;
    if (Clock::now() < run.attempt.deadline) judged = outcomes_.hand_back_if_outage(r, error);
    if (judged == OutcomeRecorder::StartedFailure::HandedBack) return;
    outcomes_.record_failure(r, outcomes_.describe_judged(error, r, run.attempt.deadline, judged));
    return;
  }
  // An abandoned thread is no longer the worker's, so it runs nothing more.
  if (run.attempt.abandoned) {
    for (const auto* r : run.locked) outcomes_.record_failure(*r, outcomes_.describe(error, *r, run.attempt.deadline));
    return;
  }
  // A throw, an error that looks like a database outage (or a batch past its deadline)
  // proves nothing about any one message: each runs again alone within its claim, and is
  // charged only for a failure of its own.
  const std::vector<const ClaimedReceipt*> singly = run.locked;
  rerun_handler_batch_singly(singly, watchdog);
}

void MessageProcessor::rerun_handler_batch_singly(const std::vector<const ClaimedReceipt*>& receipts,
                                                  DeadlineWatchdog& watchdog) {
  const HandlerEntry& entry = handlers_.at(receipts.front()->consumer);
  for (std::size_t i = 0; i < receipts.size(); ++i) {
    // The k-th message waits for k - 1 transactions of up to a deadline each: renew the
    // leases of those still waiting (docs/worker.md, "How long a claim is held").
    try {
      store_.renew_leases(std::span(receipts).subspan(i), options_.lease);
    } catch (const std::exception& e) {
      logger("worker")->warn("could not renew the leases of {} receipts of a batch: {}", receipts.size() - i, e.what());
    }
    if (entry.handler) {
      process_one(*receipts[i], watchdog);
    } else {
      process_handler_batch({receipts[i]}, watchdog);
    }
  }
}

}  // namespace boxcar::detail
