// Errors of OutboxEmitter::emit, thrown before anything is written.
#pragma once

#include <string>

#include "boxcar/core/error.hpp"

namespace boxcar {

/// The event or its options are malformed. `field()` names the input: "event_type",
/// "schema_version", "topic", "tenant_id", "key", "causation_id", "correlation_id",
/// "traceparent", "headers/<name>", or "payload" + JSON Pointer.
/// Codes: OUTBOX_FIELD_REQUIRED, OUTBOX_FIELD_TOO_LONG, OUTBOX_FIELD_INVALID,
/// OUTBOX_TENANT_SCOPE_INVALID, OUTBOX_SCHEMA_VERSION_INVALID, OUTBOX_EVENT_TOO_LARGE
/// (field "payload": the Kafka record would exceed OutboxOptions::max_record_bytes, the
/// producer's message.max.bytes), OUTBOX_TOPIC_UNKNOWN (field "topic": not among the
/// declared OutboxOptions::topics, outbox.topics), and the JSON_* codes.
/// Permanent: the same event fails the same way on every retry, so a handler that lets
/// it escape sends its receipt to DEAD at once.
class OutboxValidationError final : public PermanentError {
 public:
  OutboxValidationError(std::string code, std::string field, const std::string& message)
      : PermanentError(std::move(code), field + ": " + message), field_(std::move(field)) {}
  const std::string& field() const noexcept { return field_; }

 private:
  std::string field_;
};

/// No outbox partition covers the event's id (docs/schema.md, "Outbox partitions"): the
/// partitions ahead ran out (no janitor runs, nor `boxcar purge`) or this host's clock is
/// far off. Code OUTBOX_PARTITION_MISSING. The insert failed, so the caller's transaction
/// is aborted: it rolls back whole and nothing is written or lost. Not permanent: a
/// handler that lets it escape is retried, and succeeds once the janitor has created the
/// partition.
class OutboxPartitionMissingError final : public Error {
 public:
  explicit OutboxPartitionMissingError(const std::string& message) : Error("OUTBOX_PARTITION_MISSING", message) {}
};

}  // namespace boxcar
