// emit(): validate, canonicalise, insert in the caller's transaction, wake publishers
// after that transaction commits.
#include "boxcar/outbox/outbox_emitter.hpp"

#include "boxcar/core/detail/database_errors.hpp"

#include "boxcar/outbox/reserved_headers.hpp"
#include "boxcar/core/detail/async_notifier.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/uuid.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "outbox_queries.hpp"

namespace boxcar {
namespace {

constexpr std::size_t kMaxFieldBytes = 512;
// Kafka's own limit on topic names.
constexpr std::size_t kMaxTopicBytes = 249;
constexpr CanonicalLimits kHeaderLimits{.max_depth = 2, .max_bytes = 64 * 1024};

void check_text(const std::string& value, const char* field, bool required, std::size_t max_bytes = kMaxFieldBytes) {
  if (value.empty()) {
    if (required) throw OutboxValidationError("OUTBOX_FIELD_REQUIRED", field, "must not be empty");
    return;
  }
  if (value.size() > max_bytes)
    throw OutboxValidationError(
        "OUTBOX_FIELD_TOO_LONG", field,
        "is " + std::to_string(value.size()) + " bytes; the limit is " + std::to_string(max_bytes));
  if (!is_valid_utf8(value) || value.find('\0') != std::string::npos)
    throw OutboxValidationError("OUTBOX_FIELD_INVALID", field, "must be valid UTF-8 without U+0000");
}

void check_topic(const std::string& topic) {
  check_text(topic, "topic", true, kMaxTopicBytes);
  for (char c : topic) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      throw OutboxValidationError("OUTBOX_FIELD_INVALID", "topic",
                                  "Kafka topic names may contain only a-z, A-Z, 0-9, '.', '_' and '-'");
  }
}

std::string joined(const std::set<std::string>& topics) {
  std::string out;
  for (const auto& topic : topics) out += (out.empty() ? "" : ",") + topic;
  return out;
}

}  // namespace

// The record the publisher will build from this row (record_mapper.cpp): an event the
// producer refuses (MSG_SIZE_TOO_LARGE) would only fail at every publish, so refuse it here.
void OutboxEmitter::check_record_size(const OutboxMessage& message, const EmitOptions& options, const std::string& key,
                                      const std::string& payload, const std::string& event_id) const {
  RecordSize size(key.size(), payload.size());
  for (const auto& [name, value] : options.headers) size.header(name, value.size());
  size.header(headers::kEventId, event_id.size())
      .header(headers::kEventType, message.event_type.size())
      .header(headers::kSchemaVersion, std::to_string(message.schema_version).size())
      .header(headers::kTenantScope, std::string_view(to_string(options.scope.kind)).size());
  const auto optional = [&](std::string_view name, const std::string& value) {
    if (!value.empty()) size.header(name, value.size());
  };
  optional(headers::kTenantId, options.scope.id);
  optional(headers::kCausationId, options.causation_id);
  optional(headers::kCorrelationId, options.correlation_id);
  optional(headers::kTraceparent, options.traceparent);
  if (size.bytes() > options_.max_record_bytes)
    throw OutboxValidationError("OUTBOX_EVENT_TOO_LARGE", "payload",
                                "the Kafka record would be " + std::to_string(size.bytes()) + " bytes (payload " +
                                    std::to_string(payload.size()) + ", key and headers); the limit is " +
                                    std::to_string(options_.max_record_bytes) +
                                    " (max_record_bytes, the producer's message.max.bytes)");
}

std::string OutboxEmitter::notify_channel(const std::string& schema) { return "boxcar_outbox_" + schema; }

OutboxEmitter::OutboxEmitter(std::shared_ptr<ConnectionPool> pool, OutboxOptions options)
    : options_(std::move(options)) {
  if (!pool) throw ConfigError("outbox.pool", "a connection pool is required");
  // In a Runtime, max_record_bytes is kafka.message.max.bytes (one limit for both ends).
  if (options_.max_record_bytes == 0)
    throw ConfigError("kafka.message.max.bytes",
                      "max_record_bytes (the producer's message.max.bytes) must be at least 1");
  for (const auto& topic : options_.topics) {
    try {
      check_topic(topic);
    } catch (const OutboxValidationError& e) {
      throw ConfigError("outbox.topics", "declares '" + topic + "', which Kafka refuses: " + e.what());
    }
  }
  const std::string schema = validate_schema_name(options_.schema, "schema");
  insert_sql_ = detail::with_schema(outbox_sql::kInsert, schema);
  insert_name_ = "boxcar.outbox.insert." + schema;
  if (options_.notify)
    notifier_ = std::make_unique<detail::AsyncNotifier>(pool->connection_string(), notify_channel(schema));
}

OutboxEmitter::~OutboxEmitter() = default;

EmittedEvent OutboxEmitter::emit(TxView tx, const OutboxMessage& message, const EmitOptions& options) {
  check_text(message.event_type, "event_type", true);
  if (message.schema_version < 1)
    throw OutboxValidationError("OUTBOX_SCHEMA_VERSION_INVALID", "schema_version",
                                "must be at least 1, got " + std::to_string(message.schema_version));
  check_topic(message.topic);
  if (!options_.topics.empty() && !options_.topics.contains(message.topic))
    throw OutboxValidationError(
        "OUTBOX_TOPIC_UNKNOWN", "topic",
        "'" + message.topic + "' is not a declared topic (outbox.topics: " + joined(options_.topics) + ")");
  if (options.scope.kind == Scope::Kind::Tenant) {
    if (options.scope.id.empty())
      throw OutboxValidationError("OUTBOX_TENANT_SCOPE_INVALID", "scope.id",
                                  "a tenant event needs its tenant id; pass .scope = context.scope, "
                                  "or Scope::global() for an intentionally global event");
    check_text(options.scope.id, "scope.id", true);
  } else if (!options.scope.id.empty()) {
    throw OutboxValidationError("OUTBOX_TENANT_SCOPE_INVALID", "scope.id", "a global event carries no tenant id");
  }
  check_text(options.key, "key", false);
  check_text(options.causation_id, "causation_id", false);
  check_text(options.correlation_id, "correlation_id", false);
  check_text(options.traceparent, "traceparent", false);

  std::string payload;
  try {
    payload = canonicalize(message.payload, options_.payload_limits);
  } catch (const JsonValueError& e) {
    throw OutboxValidationError(e.code(), "payload" + e.path(), e.what());
  }
  for (const auto& [name, value] : options.headers) {
    if (headers::is_reserved(name))
      throw OutboxValidationError("OUTBOX_FIELD_INVALID", "headers/" + name,
                                  "is a header the publisher sets itself; use the EmitOptions field");
    if (name.empty()) throw OutboxValidationError("OUTBOX_FIELD_INVALID", "headers", "header names must not be empty");
  }
  std::string headers;
  try {
    headers = canonicalize(nlohmann::json(options.headers), kHeaderLimits);
  } catch (const JsonValueError& e) {
    throw OutboxValidationError(e.code(), "headers" + e.path(), e.what());
  }

  EmittedEvent emitted{0, uuid_v7()};
  const std::string key = !options.key.empty()        ? options.key
                          : !options.scope.id.empty() ? options.scope.id
                                                      : emitted.event_id;
  // Only an explicit key orders: the default key (the tenant id) places a tenant's events on
  // one partition, and ordering by it would serialise every emitter of the tenant from its
  // emit to its commit. A key that is the event's own id is unique: nothing to wait for.
  const bool ordered = options.ordered && !options.key.empty() && key != emitted.event_id;
  check_record_size(message, options, key, payload, emitted.event_id);
  pqxx::result row;
  try {
    row = tx.exec_prepared(insert_name_, insert_sql_, emitted.event_id, message.event_type, message.schema_version,
                           message.topic, key, to_string(options.scope.kind), options.scope.id, options.causation_id,
                           options.correlation_id, options.traceparent, headers, payload, ordered);
  } catch (const pqxx::sql_error& e) {
    // check_violation: every CHECK of outbox_events is validated above, so what is left is
    // the partition routing (no partition covers the id; or the first partition's bound).
    if (detail::sqlstate_of(e) != "23514") throw;
    throw OutboxPartitionMissingError(
        "no partition of outbox_events covers event id " + emitted.event_id +
        " (emitted now by this host's clock): outbox partitions are created ahead by the janitor "
        "(retention.janitor) or `boxcar purge`; this transaction is aborted, roll it back and retry");
  }
  emitted.id = row[0][0].as<std::int64_t>();
  if (notifier_) {
    detail::AsyncNotifier* notifier = notifier_.get();
    tx.on_commit([notifier, topic = message.topic] { notifier->notify(topic); });
  }
  if (options_.metrics) {
    // Counted when it commits: a rolled-back emit never existed.
    tx.on_commit([metrics = options_.metrics, type = message.event_type, topic = message.topic] {
      metrics->emitted(type, topic);
    });
  }
  return emitted;
}

}  // namespace boxcar
