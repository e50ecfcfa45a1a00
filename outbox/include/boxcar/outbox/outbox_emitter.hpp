// boxcar::OutboxEmitter — writes events into the outbox inside the caller's transaction,
// so the event commits or rolls back with the business writes (and, in a handler, with
// the inbox completion). A publisher delivers committed events later, at least once.
//
//   outbox.emit(context.tx, OrderProjected{order_id},
//               {.scope = context.scope, .causation_id = context.message_id});
//
// Thread-safety: OutboxEmitter is thread-safe; share one per process. emit() uses the
// given transaction only, through a TxView that cannot commit it; an owning Tx converts.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "boxcar/outbox/errors.hpp"
#include "boxcar/outbox/outbox_event.hpp"
#include "boxcar/outbox/record_size.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/metrics.hpp"
#include "boxcar/core/scope.hpp"
#include "boxcar/core/tx_view.hpp"

namespace boxcar {

namespace detail {
class AsyncNotifier;
}

struct EmitOptions {
  /// The event's scope: usually context.scope of the message being handled, so a global
  /// receipt emits a global event and a tenant's receipt an event of that tenant. A
  /// tenant scope needs its (authenticated) tenant id; there is no default tenant.
  Scope scope{};
  /// Usually context.message_id of the message being handled.
  std::string causation_id{};
  std::string correlation_id{};
  /// Kafka record key. Default: the scope's tenant id (one tenant's events share a partition);
  /// for a global event without a key, the event id.
  std::string key{};
  std::map<std::string, std::string> headers{};
  std::string traceparent{};
  /// Whether the event keeps its place among the events of its (topic, key): published
  /// only after every earlier event of the key that took part is PUBLISHED or DEAD, in the
  /// commit order of the emitting transactions, however many publishers run
  /// (docs/publisher.md, "Ordering"). An emitting transaction then holds its keys until it
  /// commits: a concurrent emitter of the same key waits for it. false: published as soon
  /// as a publisher claims it, with no wait at emit and no order (more throughput on a hot
  /// key). Only an event emitted with an explicit `key` takes part: the default key (the
  /// tenant id) spreads partitions, and ordering by it would serialise all of a tenant's
  /// emitters; a global event without a key (its key is its own event id) has nothing to be
  /// ordered with.
  bool ordered = true;
};

struct OutboxOptions {
  /// Schema holding outbox_events (see boxcar::migrate).
  std::string schema = "boxcar";
  CanonicalLimits payload_limits{};
  /// Largest Kafka record an event may become (payload, key and every header the publisher
  /// sets, measured as boxcar/outbox/record_size.hpp does): the producer's
  /// `message.max.bytes`. A larger event could never be produced, so emit() refuses it.
  std::size_t max_record_bytes = kDefaultMaxRecordBytes;
  /// outbox.topics: when not empty, the only topics emit() accepts (OutboxMessage::topic,
  /// the topic as emitted, before any publisher.topics override); any other is refused with
  /// OUTBOX_TOPIC_UNKNOWN before anything is written, so a misspelt topic fails the
  /// emitting transaction instead of an event at publish time. Empty: every topic. The
  /// publisher's own publisher.allowed_topics is checked as before.
  std::set<std::string> topics{};
  /// Wake idle publishers with NOTIFY after the emitting transaction commits.
  bool notify = true;
  /// Where committed emits are counted (boxcar_outbox_emitted_total); null: nowhere.
  std::shared_ptr<Metrics> metrics{};
};

/// The stored event: its id is what every publish attempt carries.
struct EmittedEvent {
  std::int64_t id;
  std::string event_id;  // UUIDv7
};

class OutboxEmitter {
 public:
  /// `pool` is the pool the application's transactions come from; the emitter uses its
  /// connection string only for its own NOTIFY connection.
  /// @throws ConfigError for a bad schema name, a null pool, max_record_bytes 0 or a declared
  ///   topic Kafka would refuse ("outbox.topics"). Does not touch the database.
  OutboxEmitter(std::shared_ptr<ConnectionPool> pool, OutboxOptions options = {});
  ~OutboxEmitter();
  OutboxEmitter(const OutboxEmitter&) = delete;
  OutboxEmitter& operator=(const OutboxEmitter&) = delete;

  /// Writes `message` into the outbox in `tx` (not committed here). The NOTIFY wake-up
  /// and the emitted_total count run after `tx` commits, never after a rollback or a
  /// rollback to a savepoint taken before the emit.
  /// @throws OutboxValidationError before writing anything (OUTBOX_EVENT_TOO_LARGE,
  ///   field "payload", when its record would exceed options().max_record_bytes;
  ///   OUTBOX_TOPIC_UNKNOWN, field "topic", for a topic outside options().topics);
  ///   pqxx exceptions from the insert, as any statement in `tx` would.
  EmittedEvent emit(TxView tx, const OutboxMessage& message, const EmitOptions& options);

  template <OutboxEvent E>
  EmittedEvent emit(TxView tx, const E& event, const EmitOptions& options) {
    nlohmann::json payload;
    to_json(payload, event);
    return emit(tx,
                OutboxMessage{.event_type = std::string(E::event_type),
                              .schema_version = E::schema_version,
                              .topic = std::string(E::topic),
                              .payload = std::move(payload)},
                options);
  }

  /// The NOTIFY channel publishers LISTEN on for this schema.
  static std::string notify_channel(const std::string& schema);
  const OutboxOptions& options() const noexcept { return options_; }

 private:
  void check_record_size(const OutboxMessage& message, const EmitOptions& options, const std::string& key,
                         const std::string& payload, const std::string& event_id) const;

  OutboxOptions options_;
  std::string insert_sql_;
  std::string insert_name_;
  std::unique_ptr<detail::AsyncNotifier> notifier_;
};

}  // namespace boxcar
