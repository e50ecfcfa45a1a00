// The SQS ingress example: long-poll a tenant's queue, accept each received batch with
// Inbox::accept_many (one transaction), and settle every message by its own result:
//
//   Accepted / Duplicate                     DeleteMessageBatch (the receipt is durable)
//   InboxValidationError, IDENTITY_CONFLICT,
//   a body that is not strict JSON           SendMessageBatch to the dead-letter queue with
//                                            the reason in message attributes, then delete
//   InboxStorageError (the whole batch)      nothing: no delete, no dead letter; every
//                                            message reappears after its visibility timeout
//                                            and the redelivery reconciles an uncertain commit
//
// The tenant is the queue's, from configuration: each tenant has its own queue, and the
// queue's access policy (IAM) decides who may send to it. Nothing in a message names it.
//
// Thread-safety: one SqsIngress per thread (it owns one SqsClient); the Inbox is shared.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/backoff.hpp"
#include "sqs_client.hpp"

namespace boxcar::examples::sqs {

/// A tenant's queue and its dead-letter queue. The tenant id is trusted because only that
/// tenant's producers are allowed to send to this queue.
struct TenantQueue {
  std::string tenant{};
  std::string queue_url{};
  std::string dead_letter_queue_url{};
};

struct IngressOptions {
  /// Identity parts that messages do not carry: the producer (source) and the logical
  /// effect (Boxcar consumer). Never change them for a queue already being consumed.
  std::string source = "orders-service";
  std::string consumer = "orders.projection.v1";
  /// Batch size (up to 10, one accept_many transaction), long-poll wait and an optional
  /// visibility timeout override. Keep the visibility timeout well above the time a
  /// batch takes, or messages reappear (as harmless duplicates) while still in work.
  ReceiveOptions receive{};
  /// Delay after a storage failure or an SQS failure before the next receive.
  BackoffOptions backoff{.base = std::chrono::milliseconds(500), .cap = std::chrono::seconds(30)};
};

struct IngressStats {
  std::size_t received = 0;
  std::size_t accepted = 0;
  std::size_t duplicates = 0;
  std::size_t dead_lettered = 0;
  /// Batches the inbox could not store: nothing of them was deleted.
  std::size_t storage_failures = 0;
  /// Messages whose delete or dead-letter send failed; they reappear and are settled then.
  std::size_t unsettled = 0;

  IngressStats& operator+=(const IngressStats& other);
};

/// The AcceptRequest a message maps to, or why it cannot be accepted at all. Exposed for
/// tests. Message attributes: event-id, event-type, schema-version (Number); optional
/// traceparent, tracestate, correlation-id, causation-id. The body is the JSON payload.
struct MappedMessage {
  std::optional<AcceptRequest> request{};
  std::string error_code{};
  std::string error_field{};
  std::string error_message{};
};
MappedMessage map_message(const SqsMessage& message, const TenantQueue& queue, const IngressOptions& options);

/// The message part an InboxValidationError::field() refers to ("message_id" ->
/// "event-id", "payload/a/0" -> "body/a/0", ...), so dead letters speak the producer's terms.
std::string message_field_of(const std::string& inbox_field);

/// Message attribute names the dead letters carry, besides the original attributes.
inline constexpr const char* kDeadLetterCode = "dead-letter-code";
inline constexpr const char* kDeadLetterField = "dead-letter-field";
inline constexpr const char* kDeadLetterReason = "dead-letter-reason";
inline constexpr const char* kDeadLetterMessageId = "dead-letter-message-id";

class SqsIngress {
 public:
  /// Opens no connection yet. `inbox` must outlive this object and declare options.consumer.
  SqsIngress(Inbox& inbox, SqsOptions sqs, TenantQueue queue, IngressOptions options);

  /// One ReceiveMessage (a long poll up to options.receive.wait_seconds) and the
  /// settlement of what it returned.
  /// @throws SqsError when the receive fails (nothing was settled).
  IngressStats poll_once();

  /// Settles received messages: accept_many, then dead letters, then one delete batch.
  /// A failed delete or dead-letter send is logged and counted, never thrown: the message
  /// reappears and is settled on its next delivery.
  IngressStats process(const std::vector<SqsMessage>& messages);

  /// Receives without waiting until a receive returns nothing (or a batch fails to be
  /// stored). For tests and `--once`.
  /// @throws SqsError when a receive fails.
  IngressStats drain();

  /// poll_once() until `stop`; backs off after storage and SQS failures. Returns after
  /// the current long poll once `stop` is set.
  IngressStats run(const std::atomic<bool>& stop);

  const TenantQueue& queue() const noexcept { return queue_; }

 private:
  Inbox& inbox_;
  SqsClient client_;
  TenantQueue queue_;
  IngressOptions options_;
};

}  // namespace boxcar::examples::sqs
