// Recording and reporting every outcome of an attempt.
#include "outcome_recorder.hpp"

#include <cxxabi.h>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/inbox/detail/error_text.hpp"
#include "boxcar/inbox/errors.hpp"
#include "handler_run.hpp"
#include "infrastructure_failure.hpp"

namespace boxcar::detail {

namespace {

// The note that goes before the error of an attempt charged after the outage bound.
std::string outage_bound_note(int max_outage_hand_backs) {
  return "charged after " + std::to_string(max_outage_hand_backs) +
         " uncharged hand-backs during database outages (worker.max_outage_hand_backs): ";
}

}  // namespace

std::string demangled_type(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type.name();
}

OutcomeRecorder::OutcomeRecorder(std::shared_ptr<ConnectionPool> pool, ReceiptStore& store,
                                 const std::map<std::string, HandlerEntry>& handlers, const WorkerOptions& options,
                                 AtomicWorkerStats& stats)
    : pool_(std::move(pool)),
      store_(store),
      handlers_(handlers),
      options_(options),
      stats_(stats),
      probe_(pool_->connection_string(), options.schema),
      log_(logger("worker")) {}

void OutcomeRecorder::completed(const ClaimedReceipt& receipt, double age_seconds) {
  ++stats_.completed;
  observe(receipt, "completed");
  if (options_.metrics) options_.metrics->accept_to_complete(receipt.consumer, age_seconds);
  if (log_->should_log(spdlog::level::debug))
    log_event(*log_, LogLevel::Debug, "receipt completed",
              {{"outcome", "completed"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)}});
}

void OutcomeRecorder::completed(std::span<const ClaimedReceipt* const> receipts,
                                const std::vector<std::pair<std::int64_t, double>>& completed) {
  stats_.completed += completed.size();
  for (const auto& [id, age] : completed) {
    // Init-capture: clang before 16 cannot capture a structured binding (tests/fuzz builds with clang-14).
    const auto* r = *std::find_if(receipts.begin(), receipts.end(),
                                  [&completed_id = id](const auto* s) { return s->id == completed_id; });
    observe(*r, "completed");
    if (options_.metrics) options_.metrics->accept_to_complete(r->consumer, age);
  }
}

void OutcomeRecorder::commit_uncertain(const ClaimedReceipt& receipt, std::size_t messages, const std::string& error) {
  // Committed or not, the rows tell: COMPLETED, or PROCESSING until the leases expire.
  if (messages == 1)
    log_event(*log_, LogLevel::Warn, "commit outcome unknown",
              {{"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"error", error}});
  else
    log_event(*log_, LogLevel::Warn, "commit outcome unknown",
              {{"consumer", receipt.consumer},
               {"receipt_id", std::to_string(receipt.id)},
               {"messages", std::to_string(messages)},
               {"error", error}});
}

void OutcomeRecorder::stale(const ClaimedReceipt& receipt, const char* what) {
  ++stats_.stale;
  observe(receipt, "stale");
  log_event(*log_, LogLevel::Info, what,
            {{"outcome", "stale"},
             {"consumer", receipt.consumer},
             {"message_id", receipt.message_id},
             {"receipt_id", std::to_string(receipt.id)},
             {"attempt", std::to_string(receipt.attempt)}});
}

void OutcomeRecorder::record_failure(const ClaimedReceipt& receipt, FailureRecord failure) {
  try {
    report_failure(receipt, failure, store_.fail(nullptr, receipt, failure, options_.max_attempts));
  } catch (const std::exception& e) {
    // Left PROCESSING: lease recovery retries it, counting this attempt.
    log_->error("could not record the failure of receipt {}: {}", receipt.id, e.what());
  }
}

void OutcomeRecorder::report_failure(const ClaimedReceipt& receipt, const FailureRecord& failure,
                                     const std::optional<std::string>& status) {
  if (!status) {
    ++stats_.stale;
    observe(receipt, "stale");
    log_event(*log_, LogLevel::Info, "attempt failed after its claim went stale",
              {{"outcome", "stale"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)}});
  } else if (*status == "DEAD") {
    ++stats_.dead;
    observe(receipt, "dead");
    log_event(*log_, LogLevel::Warn, "receipt is DEAD",
              {{"outcome", "dead"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)},
               // Short of max_attempts, only an ordered consumer's park_after policy ends it.
               {"dead_reason", failure.permanent                          ? failure.dead_reason
                               : receipt.attempt >= options_.max_attempts ? "ATTEMPTS_EXHAUSTED"
                                                                          : "PARKED_AFTER_ATTEMPTS"},
               {"error_type", failure.error_type},
               {"error", failure.message}});
  } else {
    ++stats_.retried;
    observe(receipt, "retried");
    log_event(*log_, LogLevel::Info, "attempt failed, retrying after backoff",
              {{"outcome", "retried"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)},
               {"retry_in_ms", std::to_string(failure.retry_delay.count())},
               {"error_type", failure.error_type},
               {"error", failure.message}});
  }
}

void OutcomeRecorder::give_back_unstarted(std::span<const ClaimedReceipt* const> receipts, std::exception_ptr error) {
  const InfrastructureFailure failure = classify_infrastructure_failure(error);
  const auto delay = backoff_delay(options_.backoff, receipts.front()->attempt);
  stats_.infrastructure_retries += receipts.size();
  for (const auto* r : receipts) {
    if (options_.metrics) options_.metrics->infrastructure_retry(r->consumer, failure.reason);
    log_event(*log_, LogLevel::Warn, "the database failed before the handler ran; the claim goes back unspent",
              {{"outcome", "infrastructure_retry"},
               {"consumer", r->consumer},
               {"message_id", r->message_id},
               {"receipt_id", std::to_string(r->id)},
               {"reason", failure.reason},
               {"retry_in_ms", std::to_string(delay.count())},
               {"error", bounded_error_text(failure.message, options_.max_error_bytes)}});
  }
  try {
    store_.hand_back(receipts, delay);
  } catch (const std::exception& e) {
    // Left PROCESSING: lease recovery gives the attempt back when the lease expires (a
    // suspect whose solo start was recorded takes a strike instead: docs/worker.md).
    log_->error("could not give back {} receipts after an infrastructure failure: {}", receipts.size(), e.what());
  }
}

OutcomeRecorder::StartedFailure OutcomeRecorder::hand_back_if_outage(const ClaimedReceipt& receipt,
                                                                     std::exception_ptr error) {
  const InfrastructureFailure failure = classify_infrastructure_failure(error);
  if (failure.probe == OutageProbeKind::None) return StartedFailure::Charge;
  const OutageProbeResult probe = probe_.run(failure.probe);
  const std::string error_text = bounded_error_text(failure.message, options_.max_error_bytes);
  if (!probe.outage) {
    // One statement failed, not the database: the handler's failure, an attempt.
    log_event(*log_, LogLevel::Info, "the handler's error looked like a database outage, but the database is up",
              {{"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)},
               {"reason", failure.reason},
               {"probe", probe.finding},
               {"error", error_text}});
    return StartedFailure::Charge;
  }
  std::optional<int> hand_backs;
  try {
    hand_backs = store_.hand_back_in_outage(receipt, options_.max_outage_hand_backs, options_.backoff);
  } catch (const std::exception& e) {
    // Left PROCESSING: lease recovery gives the attempt back when the lease expires (a
    // suspect whose solo start was recorded takes a strike instead: docs/worker.md).
    ++stats_.infrastructure_retries;
    if (options_.metrics) options_.metrics->infrastructure_retry(receipt.consumer, failure.reason);
    log_->error("could not give back receipt {} after a database outage under its handler: {}", receipt.id, e.what());
    return StartedFailure::HandedBack;
  }
  if (!hand_backs) {
    log_event(*log_, LogLevel::Warn,
              "the database failed under the handler, but the receipt has had its uncharged hand-backs: charged",
              {{"outcome", "outage_bound"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)},
               {"reason", failure.reason},
               {"max_outage_hand_backs", std::to_string(options_.max_outage_hand_backs)},
               {"probe", probe.finding},
               {"error", error_text}});
    return StartedFailure::ChargeAfterOutageBound;
  }
  ++stats_.infrastructure_retries;
  if (options_.metrics) options_.metrics->infrastructure_retry(receipt.consumer, failure.reason);
  log_event(
      *log_, LogLevel::Warn,
      "the database failed under the handler (a probe confirmed it); the claim goes back unspent",
      {{"outcome", "infrastructure_retry"},
       {"consumer", receipt.consumer},
       {"message_id", receipt.message_id},
       {"receipt_id", std::to_string(receipt.id)},
       {"reason", failure.reason},
       {"outage_hand_backs", std::to_string(*hand_backs) + " of " + std::to_string(options_.max_outage_hand_backs)},
       {"probe", probe.finding},
       {"error", error_text}});
  return StartedFailure::HandedBack;
}

FailureRecord OutcomeRecorder::describe_judged(std::exception_ptr error, const ClaimedReceipt& receipt,
                                               Clock::time_point deadline, StartedFailure judged) const {
  FailureRecord failure = describe(std::move(error), receipt, deadline);
  if (judged == StartedFailure::ChargeAfterOutageBound)
    failure.message = bounded_error_text(outage_bound_note(options_.max_outage_hand_backs) + failure.message,
                                         options_.max_error_bytes);
  return failure;
}

FailureRecord OutcomeRecorder::describe(std::exception_ptr error, const ClaimedReceipt& receipt,
                                        Clock::time_point deadline) const {
  FailureRecord failure;
  failure.retry_delay = backoff_delay(options_.backoff, receipt.attempt);
  const bool late = Clock::now() >= deadline;
  try {
    std::rethrow_exception(error);
  } catch (const HandlerEndedTransaction& e) {
    failure.permanent = true;
    failure.dead_reason = "HANDLER_ENDED_TRANSACTION";
    failure.error_type = "HandlerEndedTransaction";
    failure.message = e.what();
  } catch (const InboxPermanentError& e) {
    failure.permanent = true;
    failure.dead_reason = "HANDLER_PERMANENT";
    failure.error_type = "InboxPermanentError";
    failure.message = e.what();
  } catch (const PermanentError& e) {
    // A misused API (e.g. an emit the outbox rejects) fails the same way on every retry.
    failure.permanent = true;
    failure.dead_reason = "HANDLER_PERMANENT";
    failure.error_type = demangled_type(typeid(e));
    failure.message = e.code() + ": " + e.what();
  } catch (const std::exception& e) {
    failure.error_type = late ? "HandlerTimeout" : demangled_type(typeid(e));
    failure.message = late ? "cut off at its deadline of " + std::to_string(options_.handler_timeout.count()) +
                                 " ms (" + demangled_type(typeid(e)) + ": " + e.what() + ")"
                           : e.what();
  } catch (...) {
    failure.error_type = late ? "HandlerTimeout" : "unknown";
    failure.message = "a non-standard exception was thrown";
  }
  failure.message = bounded_error_text(failure.message, options_.max_error_bytes);
  failure.error_type = bounded_error_text(failure.error_type, 200);
  return failure;
}

bool OutcomeRecorder::exhausted_by_lease_recovery(const ClaimedReceipt& receipt) {
  if (receipt.status != "DEAD") return false;
  ++stats_.lease_expired;
  ++stats_.dead;
  observe(receipt, "dead");
  log_event(*log_, LogLevel::Warn, "receipt is DEAD: its attempts ended in lease expiry",
            {{"outcome", "dead"},
             {"consumer", receipt.consumer},
             {"message_id", receipt.message_id},
             {"receipt_id", std::to_string(receipt.id)},
             {"attempt", std::to_string(receipt.attempt)}});
  return true;
}

void OutcomeRecorder::dead_letter_unsupported(std::span<const ClaimedReceipt* const> receipts) {
  if (receipts.empty()) return;
  // One transaction for the claim's unsupported receipts: a flood of unknown event types
  // (a misrouted topic, a sender's new type) is dead-lettered at one commit per claim,
  // not one per message. On any failure nothing of it commits and the receipts stay
  // PROCESSING: lease recovery brings them back and this runs again.
  std::vector<std::optional<std::string>> statuses;
  statuses.reserve(receipts.size());
  try {
    Tx tx = pool_->begin(LoanUse::BoxcarOnly);
    for (const auto* receipt : receipts)
      statuses.push_back(
          store_.fail(&tx, *receipt,
                      {.permanent = true,
                       .dead_reason = "UNSUPPORTED_EVENT",
                       .error_type = "UnsupportedEvent",
                       .message = "the handler of consumer '" + receipt->consumer + "' does not support " +
                                  receipt->event_type + " v" + std::to_string(receipt->schema_version)},
                      options_.max_attempts));
    tx.commit();
  } catch (const std::exception& e) {
    log_->error("could not mark {} unsupported receipt(s) DEAD, from receipt {}: {}", receipts.size(),
                receipts.front()->id, e.what());
    return;
  }
  for (std::size_t i = 0; i < receipts.size(); ++i) {
    const ClaimedReceipt& receipt = *receipts[i];
    if (!statuses[i]) {
      ++stats_.stale;
      observe(receipt, "stale");
      continue;
    }
    ++stats_.unsupported;
    ++stats_.dead;
    observe(receipt, "unsupported");
    // The event type is a sender's: it goes in a field, never into the message text.
    log_event(*log_, LogLevel::Warn, "receipt is DEAD: its consumer's handler does not support the event",
              {{"outcome", "unsupported"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"event_type", receipt.event_type},
               {"schema_version", std::to_string(receipt.schema_version)}});
  }
}

void OutcomeRecorder::observe(const ClaimedReceipt& receipt, std::string_view outcome) const {
  if (options_.metrics)
    options_.metrics->processed(receipt.consumer, event_type_label(handlers_, receipt.consumer, receipt.event_type),
                                outcome);
}

}  // namespace boxcar::detail
