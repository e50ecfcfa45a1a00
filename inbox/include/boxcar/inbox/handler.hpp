// What an application implements to process inbox receipts: an InboxHandler registered
// for one consumer, and the HandlerContext it receives.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/accept_request.hpp"
#include "boxcar/inbox/batch_handler.hpp"
#include "boxcar/core/scope.hpp"
#include "boxcar/core/cancellation.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/tx_view.hpp"

namespace boxcar {

/// Everything a handler knows about the message it processes.
struct HandlerContext {
  /// The transaction the worker commits together with the receipt's completion. Every
  /// database write of the handler goes through it. It is a view: it runs statements
  /// but cannot commit or roll back, and a raw exec("COMMIT") (or ROLLBACK, END) makes
  /// the receipt DEAD (HANDLER_ENDED_TRANSACTION) instead of COMPLETED. Writes made
  /// elsewhere (another connection, an HTTP call) are not part of the atomic outcome
  /// and cannot be undone when the attempt fails.
  TxView tx;
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
  /// After this instant the attempt is cut off: its transaction rolls back.
  std::chrono::steady_clock::time_point deadline;
  /// Fires at the deadline and on shutdown. Check cancelled() in long loops or register
  /// a callback to abort blocking work.
  const CancellationSignal& signal;
};

/// A handler that processes one consumer's receipts. Must be thread-safe: several handler
/// threads call handle() concurrently. A message may be handled more than once (crash,
/// timeout, retry); only one attempt's transaction ever commits.
class InboxHandler {
 public:
  virtual ~InboxHandler() = default;
  /// Applies the message. Return normally to complete it; throw InboxPermanentError (or
  /// let any other PermanentError escape) to make it DEAD at once; throw anything else to
  /// retry it with backoff.
  virtual void handle(const nlohmann::json& payload, HandlerContext& context) = 0;
};

/// An (event type, schema version) pair a handler understands.
struct EventVersion {
  std::string event_type{};
  int schema_version = 1;
  friend bool operator==(const EventVersion&, const EventVersion&) = default;
};

/// One consumer's handler: a plain `handler`, or a `batch_handler` (batch_handler.hpp),
/// optionally with a per-message `handler` as its fallback, which re-runs the messages of
/// a batch that threw one at a time (docs/worker.md, "Batch handlers").
struct HandlerRegistration {
  std::string consumer{};
  std::vector<EventVersion> supports{};
  std::shared_ptr<InboxHandler> handler{};
  std::shared_ptr<InboxBatchHandler> batch_handler{};
};

/// Thrown by a handler for a message that can never succeed (bad business data): the
/// receipt becomes DEAD at once, without further attempts. Code: HANDLER_PERMANENT.
/// Any other PermanentError escaping a handler (e.g. OutboxValidationError from a misused
/// emit) is treated the same way.
class InboxPermanentError final : public PermanentError {
 public:
  explicit InboxPermanentError(const std::string& message) : PermanentError("HANDLER_PERMANENT", message) {}
};

}  // namespace boxcar
