// Batch handlers (docs/worker.md, "Batch handlers"): one handle_batch() call per
// transaction that locks every receipt under its claim token and completes, guarded by
// the same tokens, exactly the messages reported completed — or, when any message failed,
// commits nothing of the batch: the failures are recorded, and the messages reported
// completed run again without them.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/logging.hpp"
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

}  // namespace

void MessageProcessor::process_handler_batch(const std::vector<const ClaimedReceipt*>& receipts,
                                             DeadlineWatchdog& watchdog) {
  if (receipts.empty()) return;
  const auto deadline = Clock::now() + options_.handler_timeout;
  const HandlerEntry& entry = handlers_.at(receipts.front()->consumer);
  CancellationSource source;
  std::vector<const ClaimedReceipt*> locked;
  // Until handle_batch() is called, a failure is the database's, not an attempt.
  bool handler_started = false;
  // Set when the supervisor gave this thread up while the handler ran.
  bool abandoned = false;
  // After the transaction rolled back: failures to record, and messages to run again.
  std::vector<std::pair<const ClaimedReceipt*, FailureRecord>> failed;
  std::vector<const ClaimedReceipt*> again;
  try {
    // A suspect runs alone (the suspect lane hands it over by itself), its solo start
    // durable before its transaction begins, as in single-message mode.
    if (receipts.size() == 1 && receipts.front()->suspect && !store_.start_solo(*receipts.front())) {
      report_stale(*receipts.front(), "claim went stale before the handler ran");
      return;
    }
    Tx tx = pool_->begin(LoanUse::Application);  // the handler runs on it: reset afterwards
    const auto lock = store_.lock_many(tx, receipts, ReceiptStore::TransactionDeadline::until(deadline));
    for (const auto* r : receipts) {
      if (contains(lock.ids, r->id)) {
        locked.push_back(r);
      } else {
        report_stale(*r, "claim went stale before the handler ran");
      }
    }
    if (locked.empty()) return;

    std::vector<InboxMessage> messages;
    messages.reserve(locked.size());
    for (const auto* r : locked)
      messages.push_back({.payload = r->payload,
                          .scope = r->scope,
                          .source = r->source,
                          .consumer = r->consumer,
                          .message_id = r->message_id,
                          .event_type = r->event_type,
                          .schema_version = r->schema_version,
                          .attempt = r->attempt,
                          .metadata = r->metadata});
    std::vector<std::pair<std::int64_t, double>> completed;
    try {
      BatchOutcomes outcomes;
      {
        const RunningHandlers running(in_flight_, watchdog, source, tx, lock.session, deadline, &abandoned);
        // One scope per call when the setting is configured (process() groups by it).
        set_tenant(tx, options_.tenant_setting, locked.front()->scope);
        BatchContext context{.tx = tx, .deadline = deadline, .signal = source.signal()};
        handler_started = true;
        ++stats_.handler_calls;
        const HandlerTimer timer(options_.metrics, locked.front()->consumer);
        outcomes = entry.batch_handler->handle_batch(messages, context);
      }
      if (Clock::now() >= deadline) throw HandlerTimeout("the batch handler returned after its deadline");
      if (outcomes.size() != locked.size())
        throw BatchOutcomeMismatch("handle_batch returned " + std::to_string(outcomes.size()) + " outcomes for " +
                                   std::to_string(locked.size()) + " messages");
      std::vector<const ClaimedReceipt*> reported_completed;
      for (std::size_t i = 0; i < locked.size(); ++i) {
        const auto& outcome = outcomes[i];
        if (outcome.kind() == MessageOutcome::Kind::Completed) {
          reported_completed.push_back(locked[i]);
          continue;
        }
        FailureRecord failure{.permanent = outcome.kind() == MessageOutcome::Kind::Permanent,
                              .dead_reason = "HANDLER_PERMANENT",
                              .error_type = bounded_error_text(outcome.error_type(), 200),
                              .message = bounded_error_text(outcome.error(), options_.max_error_bytes),
                              .retry_delay = backoff_delay(options_.backoff, locked[i]->attempt)};
        failed.emplace_back(locked[i], std::move(failure));
      }
      if (failed.empty()) {
        // Work the handler deferred to COMMIT must not run as the batch's tenant.
        set_tenant(tx, options_.tenant_setting, Scope::global());
        auto completion = store_.complete_many(tx, locked, lock.xact_id);
        completed = std::move(completion.receipts);
        if (completed.size() < locked.size() && store_.transaction_ended(tx, lock.xact_id))
          throw HandlerEndedTransaction(kEndedBatchText);
      } else {
        // The failures are recorded after the rollback; a handler that ended the
        // transaction may have made its writes durable, which no retry may repeat.
        if (store_.transaction_ended(tx, lock.xact_id)) throw HandlerEndedTransaction(kEndedBatchText);
        again = std::move(reported_completed);
      }
    } catch (const HandlerEndedTransaction&) {
      throw;
    } catch (...) {
      if (ended_by_handler(tx, lock.xact_id)) throw HandlerEndedTransaction(kEndedBatchText);
      throw;
    }
    if (!failed.empty()) {
      // The handler wrote in bulk: its rows for the failed messages cannot be told apart
      // from the others', so nothing of the batch commits (emits and their on-commit
      // callbacks included).
      tx.rollback();
    } else if (completed.size() < locked.size()) {
      // A completion guard matched no row: as in single-message mode, nothing of the
      // attempt commits. The stale receipts belong to whoever holds their claim now; the
      // others run again without them.
      tx.rollback();
      for (const auto* r : locked) {
        if (std::find_if(completed.begin(), completed.end(), [&](const auto& c) { return c.first == r->id; }) ==
            completed.end()) {
          report_stale(*r, "completion found the claim stale; the whole batch rolled back");
        } else {
          again.push_back(r);
        }
      }
    } else {
      BOXCAR_FAILPOINT("worker.before_commit");
      try {
        tx.commit_and_reset_session();
      } catch (const DatabaseError& e) {
        if (e.uncertain()) {
          // Committed or not, the rows tell: COMPLETED, or PROCESSING until the leases expire.
          log_event(*log_, LogLevel::Warn, "commit outcome unknown",
                    {{"consumer", locked.front()->consumer},
                     {"receipt_id", std::to_string(locked.front()->id)},
                     {"messages", std::to_string(locked.size())},
                     {"error", e.what()}});
          return;
        }
        throw;
      }
      BOXCAR_FAILPOINT("worker.after_commit");
      stats_.completed += completed.size();
      for (const auto& [id, age] : completed) {
        const auto* r = *std::find_if(locked.begin(), locked.end(),
                                      [&completed_id = id](const auto* l) { return l->id == completed_id; });
        observe(*r, "completed");
        if (options_.metrics) options_.metrics->accept_to_complete(r->consumer, age);
      }
      return;
    }
  } catch (const HandlerEndedTransaction&) {
    // Every message of the batch may have had writes made durable by the handler's end
    // of the transaction: none is retried.
    const FailureRecord failure = describe_current_exception(*locked.front(), deadline);
    for (const auto* r : locked) record_failure(*r, failure);
    return;
  } catch (...) {
    if (!handler_started) {
      // No handler ran (the database failed first): nothing committed, and no message is
      // charged.
      using Receipts = std::span<const ClaimedReceipt* const>;
      give_back_unstarted(locked.empty() ? Receipts(receipts) : Receipts(locked), std::current_exception());
      return;
    }
    const bool looks_like_outage =
        classify_infrastructure_failure(std::current_exception()).probe != OutageProbeKind::None;
    // A one-message batch has failed on its own. An error that looks like a database
    // outage is judged by the probe (docs/worker.md, "Infrastructure failures are not
    // attempts"); any other failure runs again through the fallback when one is registered.
    if (locked.size() == 1 && !abandoned && (looks_like_outage || !entry.handler)) {
      const ClaimedReceipt& r = *locked.front();
      StartedFailure judged = StartedFailure::Charge;
      if (Clock::now() < deadline) judged = hand_back_if_outage(r, std::current_exception());
      if (judged == StartedFailure::HandedBack) return;
      FailureRecord failure = describe_current_exception(r, deadline);
      if (judged == StartedFailure::ChargeAfterOutageBound)
        failure.message = bounded_error_text(outage_bound_note() + failure.message, options_.max_error_bytes);
      record_failure(r, std::move(failure));
      return;
    }
    // An abandoned thread is no longer the worker's, so it runs nothing more.
    if (abandoned) {
      for (const auto* r : locked) {
        FailureRecord failure = describe_current_exception(*r, deadline);
        record_failure(*r, std::move(failure));
      }
      return;
    }
    // A throw, an error that looks like a database outage (or a batch past its deadline)
    // proves nothing about any one message: each runs again alone within its claim, and is
    // charged only for a failure of its own.
    const std::vector<const ClaimedReceipt*> singly = locked;
    rerun_handler_batch_singly(singly, watchdog);
    return;
  }
  // Rolled back as a whole. Failures first, each charged its own attempt; then the
  // messages reported completed run again without them.
  for (auto& [r, failure] : failed) record_failure(*r, std::move(failure));
  if (again.empty()) return;
  try {
    // Their row locks are gone; a lease must not expire before the re-run commits.
    store_.renew_leases(again, options_.lease);
  } catch (const std::exception& e) {
    log_->warn("could not renew the leases of {} receipts of a batch: {}", again.size(), e.what());
  }
  process_handler_batch(again, watchdog);
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
      log_->warn("could not renew the leases of {} receipts of a batch: {}", receipts.size() - i, e.what());
    }
    if (entry.handler) {
      process_one(*receipts[i], watchdog);
    } else {
      process_handler_batch({receipts[i]}, watchdog);
    }
  }
}

}  // namespace boxcar::detail
