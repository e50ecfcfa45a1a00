// The RabbitMQ ingress example: consume a durable queue with manual acknowledgements and
// record every delivery with Inbox::accept() before acknowledging it.
//
//   accept() -> Accepted / Duplicate             basic.ack
//   InboxStorageError (failure or uncertain)     basic.nack(requeue=true) after a backoff
//   InboxValidationError, InboxConflictError,
//   unreadable body or headers, no user_id       basic.reject(requeue=false) -> dead-letter exchange
//
// The tenant is the delivery's user_id property, which the broker validated against the
// publisher's login (see tenant_of in ingress.cpp).
//
// Private to examples/rabbitmq (main.cpp and the integration test use it).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "amqp_session.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/backoff.hpp"

namespace boxcar::examples {

struct IngressOptions {
  AmqpOptions amqp{};
  /// The durable queue consumed; its dead letters go to `<queue>.dlx` (a fanout exchange)
  /// and from there to the durable queue `<queue>.dead-letter`.
  std::string queue = "orders";
  /// The Inbox consumer (the logical effect) every delivery of `queue` is accepted for.
  std::string consumer = "orders.projection.v1";
  /// The stable producer identity recorded as the message's source.
  std::string source = "orders-service";
  /// basic.qos prefetch count: deliveries in flight to this consumer at once.
  std::uint16_t prefetch = 16;
  /// Return after no delivery arrived for this long (tests); nullopt: run until `stop`.
  std::optional<std::chrono::milliseconds> until_idle{};
  /// Delay before a storage failure's nack, growing with consecutive failures, so a down
  /// database is not hammered by the redelivery loop.
  BackoffOptions storage_backoff{.base = std::chrono::milliseconds(200), .cap = std::chrono::seconds(5)};

  std::string dead_letter_exchange() const { return queue + ".dlx"; }
  std::string dead_letter_queue() const { return queue + ".dead-letter"; }
};

/// What one run did, for logs and tests.
struct IngressStats {
  std::uint64_t accepted = 0;    // acked: new receipt
  std::uint64_t duplicates = 0;  // acked: identity already retained
  std::uint64_t rejected = 0;    // dead-lettered: invalid or conflicting
  std::uint64_t requeued = 0;    // nacked with requeue: storage failure
};

/// Declares the dead-letter exchange and queue and the main queue pointing at them.
/// Idempotent with the same options; @throws AmqpError (406 PRECONDITION_FAILED when
/// `queue` already exists with other arguments).
void declare_topology(AmqpSession& session, const IngressOptions& options);

/// Connects, declares the topology, consumes until `stop` becomes true or the idle limit
/// passes, then closes the channel (unacknowledged deliveries return to the queue).
/// Blocks the calling thread; `stop` may be set from another thread or a signal waiter.
/// @throws AmqpError when the broker connection fails or the broker closes the channel.
IngressStats run_ingress(Inbox& inbox, const IngressOptions& options, const std::atomic<bool>& stop);

/// IngressOptions from RABBITMQ_HOST/PORT/USER/PASSWORD/VHOST, RABBITMQ_QUEUE,
/// RABBITMQ_PREFETCH, BOXCAR_CONSUMER and BOXCAR_SOURCE, defaults for the rest.
/// @throws std::invalid_argument for a non-numeric port or prefetch.
IngressOptions ingress_options_from_env();

}  // namespace boxcar::examples
