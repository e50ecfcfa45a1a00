// What an application implements to process a consumer's receipts in bulk: an
// InboxBatchHandler gets up to worker.batch_size messages of one consumer in one
// transaction and returns one MessageOutcome per message (docs/worker.md, "Batch handlers").
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/core/cancellation.hpp"
#include "boxcar/core/scope.hpp"
#include "boxcar/core/tx_view.hpp"
#include "boxcar/inbox/accept_request.hpp"

namespace boxcar {

/// One message of a batch: what HandlerContext carries per message. The references stay
/// valid until handle_batch() returns.
struct InboxMessage {
  const nlohmann::json& payload;
  const Scope& scope;
  const std::string& source;
  const std::string& consumer;
  const std::string& message_id;
  const std::string& event_type;
  int schema_version;
  /// 1 for the first attempt, then 1 + the attempts charged before this one: the failures
  /// the worker recorded, and crash strikes. A claim lost to a crash is not counted: lease
  /// recovery gives it back (so a message re-run after a crash sees the same number
  /// again), except a suspect's solo run, whose expired lease keeps its crash strike. Nor
  /// are claims handed back at shutdown or after a database outage (docs/worker.md,
  /// "Attempt accounting and the suspect lane").
  int attempt;
  const Metadata& metadata;
};

/// What the batch shares: one transaction, one deadline, one cancellation signal.
struct BatchContext {
  /// The transaction the worker commits together with the completions of the messages
  /// reported completed. Every database write of the handler goes through it; as for
  /// HandlerContext::tx, a raw COMMIT/ROLLBACK/END through it makes every message of the
  /// batch DEAD (HANDLER_ENDED_TRANSACTION).
  TxView tx;
  /// After this instant the batch is cut off: its transaction rolls back, and its
  /// messages are re-run one at a time, each with a deadline of its own.
  std::chrono::steady_clock::time_point deadline;
  /// Fires at the deadline and on shutdown.
  const CancellationSignal& signal;
};

/// The outcome of one message of a batch. There is no default: every message's outcome
/// is stated (a result vector of the wrong size is a handler bug, treated like a throw).
class MessageOutcome {
 public:
  enum class Kind { Completed, Retry, Permanent };

  /// The message's writes commit with its completion.
  static MessageOutcome completed() { return MessageOutcome(Kind::Completed, {}, {}); }
  /// The message is retried after backoff (DEAD once out of attempts); `error` and
  /// `error_type` are stored on the receipt.
  static MessageOutcome retry(std::string error, std::string error_type = "BatchRetry") {
    return MessageOutcome(Kind::Retry, std::move(error), std::move(error_type));
  }
  /// The message can never succeed: DEAD at once (dead reason HANDLER_PERMANENT).
  static MessageOutcome permanent(std::string error, std::string error_type = "InboxPermanentError") {
    return MessageOutcome(Kind::Permanent, std::move(error), std::move(error_type));
  }

  Kind kind() const noexcept { return kind_; }
  const std::string& error() const noexcept { return error_; }
  const std::string& error_type() const noexcept { return error_type_; }

 private:
  MessageOutcome(Kind kind, std::string error, std::string error_type)
      : kind_(kind), error_(std::move(error)), error_type_(std::move(error_type)) {}
  Kind kind_;
  std::string error_;
  std::string error_type_;
};

/// One outcome per message, in the order of the span handle_batch() received.
using BatchOutcomes = std::vector<MessageOutcome>;

/// A handler that processes a consumer's receipts in bulk. Must be thread-safe: several
/// handler threads call handle_batch() concurrently. A message may be handled more than
/// once (crash, timeout, retry, a neighbour's failure); only one attempt's transaction
/// ever commits its writes.
///
/// Rules (docs/worker.md, "Batch handlers"):
/// - write only through context.tx, keyed by the message identity (ON CONFLICT), so a
///   re-run writes nothing twice;
/// - when any message is reported retry or permanent, the whole transaction rolls back,
///   those failures are recorded, and the messages reported completed run again in a new
///   transaction through handle_batch() with just them;
/// - a throw fails the batch: its messages run again one at a time, through the
///   registration's per-message `handler` when given, else through handle_batch() with
///   one message; each is then charged only for its own failure.
class InboxBatchHandler {
 public:
  virtual ~InboxBatchHandler() = default;
  /// Applies `messages` (1 to worker.batch_size, all of one consumer; with
  /// worker.tenant_setting, all of one scope) and returns one outcome per message.
  virtual BatchOutcomes handle_batch(std::span<const InboxMessage> messages, BatchContext& context) = 0;
};

}  // namespace boxcar
