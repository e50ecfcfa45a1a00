// The handler transaction: lock under the claim token, handle, complete, commit — or
// roll back and record a retry or DEAD, guarded by the same token.
#include "message_processor.hpp"

#include <cxxabi.h>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/logging.hpp"
#include "handler_run.hpp"
#include "infrastructure_failure.hpp"
#include "tenant_setting.hpp"

namespace boxcar::detail {
namespace {

std::string demangled_type(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? name.get() : type.name();
}

}  // namespace

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
      probe_(pool_->connection_string(), options.schema),
      log_(logger("worker")) {}

void MessageProcessor::process(std::vector<ClaimedReceipt>& batch, DeadlineWatchdog& watchdog) {
  std::vector<const ClaimedReceipt*> runnable;
  // Batch handlers get messages of one consumer per call, and with worker.tenant_setting
  // of one scope, so the setting holds for the whole call: grouped here, in claim order.
  std::vector<std::vector<const ClaimedReceipt*>> handler_batches;
  std::vector<const ClaimedReceipt*> unsupported;
  for (const auto& receipt : batch) {
    if (exhausted_by_lease_recovery(receipt)) continue;
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
  dead_letter_unsupported(unsupported);
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

bool MessageProcessor::exhausted_by_lease_recovery(const ClaimedReceipt& receipt) {
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

bool MessageProcessor::supported(const ClaimedReceipt& receipt) const {
  const auto it = handlers_.find(receipt.consumer);
  return it != handlers_.end() && it->second.supports_pair(receipt.event_type, receipt.schema_version);
}

void MessageProcessor::dead_letter_unsupported(std::span<const ClaimedReceipt* const> receipts) {
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

void MessageProcessor::observe(const ClaimedReceipt& receipt, std::string_view outcome) const {
  if (options_.metrics)
    options_.metrics->processed(receipt.consumer, event_type_label(handlers_, receipt.consumer, receipt.event_type),
                                outcome);
}

FailureRecord MessageProcessor::describe_current_exception(const ClaimedReceipt& receipt,
                                                           Clock::time_point deadline) const {
  FailureRecord failure;
  failure.retry_delay = backoff_delay(options_.backoff, receipt.attempt);
  const bool late = Clock::now() >= deadline;
  try {
    throw;
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

void MessageProcessor::record_failure(const ClaimedReceipt& receipt, FailureRecord failure) {
  try {
    report_failure(receipt, failure, store_.fail(nullptr, receipt, failure, options_.max_attempts));
  } catch (const std::exception& e) {
    // Left PROCESSING: lease recovery retries it, counting this attempt.
    log_->error("could not record the failure of receipt {}: {}", receipt.id, e.what());
  }
}

void MessageProcessor::report_failure(const ClaimedReceipt& receipt, const FailureRecord& failure,
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

void MessageProcessor::report_stale(const ClaimedReceipt& receipt, const char* what) {
  ++stats_.stale;
  observe(receipt, "stale");
  log_event(*log_, LogLevel::Info, what,
            {{"outcome", "stale"},
             {"consumer", receipt.consumer},
             {"message_id", receipt.message_id},
             {"receipt_id", std::to_string(receipt.id)},
             {"attempt", std::to_string(receipt.attempt)}});
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
  const auto deadline = Clock::now() + options_.handler_timeout;
  CancellationSource source;
  std::optional<FailureRecord> failure;
  // Until the handler is called, a failure is the database's, not an attempt.
  bool handler_started = false;
  // Set when the supervisor abandoned this attempt (and terminated its session): that
  // failure is the handler's, whatever SQLSTATE the termination produced.
  bool abandoned = false;
  try {
    // A suspect's solo start is durable before its transaction begins: only a lease that
    // expires after it is a crash strike (docs/worker.md).
    if (receipt.suspect && !store_.start_solo(receipt)) {
      report_stale(receipt, "claim went stale before the handler ran");
      return;
    }
    // LoanUse::Application: the handler runs on it, so its session is reset afterwards.
    Tx tx = pool_->begin(LoanUse::Application);
    const auto locked = store_.lock(tx, receipt, ReceiptStore::TransactionDeadline::until(deadline));
    if (!locked) {
      report_stale(receipt, "claim went stale before the handler ran");
      return;
    }
    const std::string& xact_id = locked->xact_id;
    handler_started = true;
    ReceiptStore::Completion completion;
    try {
      {
        const RunningHandlers running(in_flight_, watchdog, source, tx, locked->session, deadline, &abandoned);
        invoke(receipt, tx, deadline, source.signal());
      }
      if (Clock::now() >= deadline) throw HandlerTimeout("the handler returned after its deadline");
      completion = store_.complete(tx, receipt, xact_id);
      if (completion.receipts.empty() && store_.transaction_ended(tx, xact_id))
        throw HandlerEndedTransaction(kEndedTransactionText);
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
    if (completion.receipts.empty()) {
      // Rolled back (Tx's destructor): docs/worker.md, a guard that matches no row.
      report_stale(receipt, "completion found the claim stale; the attempt rolled back");
      return;
    }
    BOXCAR_FAILPOINT("worker.before_commit");
    try {
      tx.commit_and_reset_session();
    } catch (const DatabaseError& e) {
      if (e.uncertain()) {
        // Committed or not, the row tells: COMPLETED, or PROCESSING until its lease expires.
        log_event(*log_, LogLevel::Warn, "commit outcome unknown",
                  {{"consumer", receipt.consumer},
                   {"message_id", receipt.message_id},
                   {"receipt_id", std::to_string(receipt.id)},
                   {"error", e.what()}});
        return;
      }
      throw;
    }
    BOXCAR_FAILPOINT("worker.after_commit");
    ++stats_.completed;
    observe(receipt, "completed");
    if (options_.metrics) options_.metrics->accept_to_complete(receipt.consumer, completion.receipts.front().second);
    log_event(*log_, LogLevel::Debug, "receipt completed",
              {{"outcome", "completed"},
               {"consumer", receipt.consumer},
               {"message_id", receipt.message_id},
               {"receipt_id", std::to_string(receipt.id)},
               {"attempt", std::to_string(receipt.attempt)}});
    return;
  } catch (...) {
    if (!handler_started) {
      const ClaimedReceipt* unstarted[] = {&receipt};
      give_back_unstarted(unstarted, std::current_exception());
      return;
    }
    // The handler's transaction is gone (rolled back) here. Past the deadline the session
    // may have been ended by the deadline itself (idle_in_transaction_session_timeout):
    // that looks like a lost connection, but it is the handler's timeout, an attempt; so
    // is an attempt the supervisor abandoned (and whose session it terminated).
    StartedFailure judged = StartedFailure::Charge;
    if (!abandoned && Clock::now() < deadline) judged = hand_back_if_outage(receipt, std::current_exception());
    if (judged == StartedFailure::HandedBack) return;
    failure = describe_current_exception(receipt, deadline);
    if (judged == StartedFailure::ChargeAfterOutageBound)
      failure->message = bounded_error_text(outage_bound_note() + failure->message, options_.max_error_bytes);
  }
  record_failure(receipt, std::move(*failure));
}

MessageProcessor::StartedFailure MessageProcessor::hand_back_if_outage(const ClaimedReceipt& receipt,
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

std::string MessageProcessor::outage_bound_note() const {
  return "charged after " + std::to_string(options_.max_outage_hand_backs) +
         " uncharged hand-backs during database outages (worker.max_outage_hand_backs): ";
}

void MessageProcessor::give_back_unstarted(std::span<const ClaimedReceipt* const> receipts, std::exception_ptr error) {
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

void MessageProcessor::process_batch(std::vector<const ClaimedReceipt*>& receipts, DeadlineWatchdog& watchdog) {
  const auto deadline = Clock::now() + options_.handler_timeout;
  CancellationSource source;
  // What happens after the batch transaction is gone, when it did not commit.
  enum class Then { RecordFailure, RerunIndividually, EndedTransaction } then = Then::RecordFailure;
  std::optional<FailureRecord> batch_failure;
  std::vector<const ClaimedReceipt*> locked;
  // Set when the supervisor gave this thread up while the batch ran: it is no longer the
  // worker's, so it must not go on to run the batch again one message at a time.
  bool abandoned = false;
  // The receipts whose handler was called (in order), and those to re-run one by one.
  std::size_t invoked = 0;
  std::vector<const ClaimedReceipt*> rerun;
  try {
    Tx tx = pool_->begin(LoanUse::Application);  // handlers run on it: reset afterwards
    const auto lock = store_.lock_many(tx, receipts, ReceiptStore::TransactionDeadline::until(deadline));
    for (const auto* r : receipts) {
      if (std::find(lock.ids.begin(), lock.ids.end(), r->id) != lock.ids.end()) {
        locked.push_back(r);
      } else {
        ++stats_.stale;
        observe(*r, "stale");
      }
    }
    if (locked.empty()) return;

    std::vector<const ClaimedReceipt*> succeeded;
    // Savepoint mode: failures recorded in this transaction, reported once it commits.
    struct RecordedFailure {
      const ClaimedReceipt* receipt;
      FailureRecord failure;
      std::optional<std::string> status;
    };
    std::vector<RecordedFailure> failed;
    std::vector<std::pair<std::int64_t, double>> completed;
    try {
      {
        const RunningHandlers running(in_flight_, watchdog, source, tx, lock.session, deadline, &abandoned);
        const bool savepoints = options_.batch_failure_mode == BatchFailureMode::Savepoint;
        // One round trip between two handlers: release the previous savepoint and open the
        // next in one simple query. COMMIT releases the last one.
        bool savepoint_open = false;
        for (const auto* r : locked) {
          if (savepoints) {
            tx.work().exec(savepoint_open ? "RELEASE SAVEPOINT boxcar_message; SAVEPOINT boxcar_message"
                                          : "SAVEPOINT boxcar_message");
            savepoint_open = true;
          }
          // The handler's after-commit callbacks (NOTIFY, emitted_total) belong to its
          // savepoint: a rollback to it drops them.
          const auto callbacks = tx.on_commit_mark();
          ++invoked;
          try {
            invoke(*r, tx, deadline, source.signal());
            succeeded.push_back(r);
          } catch (...) {
            // An error that looks like a database outage breaks the batch as a whole: each
            // message then runs alone below, and only a probe decides whether its own
            // failure is an outage.
            if (!savepoints || Clock::now() >= deadline ||
                classify_infrastructure_failure(std::current_exception()).probe != OutageProbeKind::None)
              throw;
            FailureRecord failure = describe_current_exception(*r, deadline);
            // Throws when the transaction itself is broken: then the batch fails as a whole.
            tx.work().exec("ROLLBACK TO SAVEPOINT boxcar_message");
            tx.drop_on_commit_since(callbacks);
            auto status = store_.fail(&tx, *r, failure, options_.max_attempts);
            failed.push_back({r, std::move(failure), std::move(status)});
          }
          // Past the deadline the batch is over: the handlers after this one would start
          // with their signal already fired, and nothing of the batch may commit.
          if (Clock::now() >= deadline) throw HandlerTimeout("the batch ran past its deadline");
        }
      }
      if (Clock::now() >= deadline) throw HandlerTimeout("the batch returned after its deadline");
      // Work a handler deferred to COMMIT (deferred triggers) must not run as the last
      // handler's tenant: it sees no tenant, so tenant policies fail closed.
      set_tenant(tx, options_.tenant_setting, Scope::global());
      if (!succeeded.empty()) {
        auto completion = store_.complete_many(tx, succeeded, lock.xact_id);
        completed = std::move(completion.receipts);
      }
      if (completed.size() < succeeded.size() && store_.transaction_ended(tx, lock.xact_id))
        throw HandlerEndedTransaction(kEndedBatchText);
    } catch (const HandlerEndedTransaction&) {
      throw;
    } catch (...) {
      if (ended_by_handler(tx, lock.xact_id)) throw HandlerEndedTransaction(kEndedBatchText);
      throw;
    }
    if (completed.size() < succeeded.size()) {
      // A completion guard matched no row: as in single-message mode, nothing of the
      // attempt commits (docs/worker.md). The stale receipts belong to whoever holds their
      // claim now; the others are re-run one per transaction.
      tx.rollback();
      for (const auto* r : locked) {
        const bool stale = std::find(succeeded.begin(), succeeded.end(), r) != succeeded.end() &&
                           std::find_if(completed.begin(), completed.end(),
                                        [&](const auto& c) { return c.first == r->id; }) == completed.end();
        if (stale) {
          report_stale(*r, "completion found the claim stale; the whole batch rolled back");
        } else {
          rerun.push_back(r);
        }
      }
      then = Then::RerunIndividually;
    } else {
      tx.commit_and_reset_session();
      stats_.completed += completed.size();
      for (const auto& [id, age] : completed) {
        // Init-capture: clang before 16 cannot capture a structured binding (tests/fuzz builds with clang-14).
        const auto* r = *std::find_if(succeeded.begin(), succeeded.end(),
                                      [&completed_id = id](const auto* s) { return s->id == completed_id; });
        observe(*r, "completed");
        if (options_.metrics) options_.metrics->accept_to_complete(r->consumer, age);
      }
      for (const auto& f : failed) report_failure(*f.receipt, f.failure, f.status);
      return;
    }
  } catch (const HandlerEndedTransaction&) {
    batch_failure = describe_current_exception(*receipts.front(), deadline);
    then = Then::EndedTransaction;
  } catch (...) {
    if (invoked == 0) {
      // No handler ran (the database failed first: pool, BEGIN, deadline, lock): nothing
      // committed, and no message is charged.
      give_back_unstarted(locked.empty() ? receipts : locked, std::current_exception());
      return;
    }
    // Nothing of the batch committed, and its failure proves nothing about any one
    // message: a batch past its deadline (each may fit its deadline alone), an error that
    // looks like a database outage (one message's own statement, or the database: only
    // a probe after a failure of its own can tell), a failed handler in Rerun mode, or in
    // Savepoint mode a failure of the transaction itself (its recorded failures rolled
    // back with it), such as a deferred constraint one message violated at COMMIT. So the
    // batch is re-run one message per transaction, within the same claims, and a message
    // is charged only for a failure of its own. An abandoned thread is no longer the
    // worker's: it re-runs nothing, and the batch is recorded as timed out.
    if (!locked.empty() && !abandoned) {
      then = Then::RerunIndividually;
      rerun = locked;
    } else {
      batch_failure = describe_current_exception(*receipts.front(), deadline);
    }
  }
  // Rolled back as a whole: nothing of this batch committed through the worker.
  switch (then) {
    case Then::RerunIndividually:
      rerun_one_by_one(rerun, watchdog);
      return;
    case Then::EndedTransaction:
      // Every handler that ran may have written durably (before the end through its
      // COMMIT, after it in autocommit); a handler that never ran is re-run normally.
      for (std::size_t i = 0; i < locked.size() && i < invoked; ++i) record_failure(*locked[i], *batch_failure);
      if (invoked < locked.size())
        rerun_one_by_one(std::vector(locked.begin() + static_cast<long>(invoked), locked.end()), watchdog);
      return;
    case Then::RecordFailure:
      // The shared failure (timeout, lost connection) for every message of the batch.
      for (const auto* r : (locked.empty() ? receipts : locked)) {
        FailureRecord failure = *batch_failure;
        failure.retry_delay = backoff_delay(options_.backoff, r->attempt);
        record_failure(*r, std::move(failure));
      }
      return;
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
      log_->warn("could not renew the leases of {} receipts of a batch: {}", receipts.size() - i, e.what());
    }
    process_one(*receipts[i], watchdog);
  }
}

}  // namespace boxcar::detail
