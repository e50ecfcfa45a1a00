// Turns an AcceptRequest into validated, canonical values, or a typed error naming the field.
#include "prepared_request.hpp"

#include <array>
#include <string_view>
#include <utility>

#include "boxcar/core/detail/json_string.hpp"
#include "boxcar/core/detail/pg_array.hpp"
#include "boxcar/inbox/errors.hpp"
#include "ordering_key.hpp"

namespace boxcar::detail {
namespace {

// Metadata is small routing data, not a second payload.
constexpr CanonicalLimits kMetadataLimits{.max_depth = 3, .max_bytes = 64 * 1024};

std::string metadata_json(const Metadata& metadata) {
  // The usual metadata, a few plain strings and no headers, written directly: the same
  // bytes as canonicalize() of the object below (names in UTF-16 order, which for these
  // ASCII names is byte order), without building it. Anything else, errors included,
  // takes the general path.
  const std::array<std::pair<std::string_view, const std::string*>, 4> plain_fields{
      {{"causationId", &metadata.causation_id},
       {"correlationId", &metadata.correlation_id},
       {"traceparent", &metadata.traceparent},
       {"tracestate", &metadata.tracestate}}};
  if (metadata.headers.empty()) {
    std::size_t bytes = 2;
    bool plain = true;
    for (const auto& [name, value] : plain_fields) {
      if (value->empty()) continue;
      plain = plain && is_plain_json_string(*value);
      bytes += name.size() + value->size() + 6;  // two pairs of quotes, a colon, a comma
    }
    if (plain && bytes <= kMetadataLimits.max_bytes) {
      std::string text;
      text.reserve(bytes);
      text += '{';
      for (const auto& [name, value] : plain_fields) {
        if (value->empty()) continue;
        if (text.size() > 1) text += ',';
        text += '"';
        text += name;
        text += "\":\"";
        text += *value;
        text += '"';
      }
      text += '}';
      return text;
    }
  }
  nlohmann::json object = nlohmann::json::object();
  const auto put = [&](const char* key, const std::string& value) {
    if (!value.empty()) object[key] = value;
  };
  put("traceparent", metadata.traceparent);
  put("tracestate", metadata.tracestate);
  put("correlationId", metadata.correlation_id);
  put("causationId", metadata.causation_id);
  if (!metadata.headers.empty()) object["headers"] = metadata.headers;
  try {
    return canonicalize(object, kMetadataLimits);
  } catch (const JsonValueError& e) {
    throw InboxValidationError(e.code(), "metadata" + e.path(), e.what());
  }
}

// The schema version's and park_after's elements (at most 11 bytes each with a separator,
// NULL is shorter) and the twelve arrays' braces or brackets, so that one item alone is a
// whole statement by this measure.
constexpr std::size_t kItemFixedBytes = 11 + 11 + 12 * 2;

}  // namespace

std::size_t batch_item_bytes(const PreparedRequest& p) {
  std::size_t bytes = kItemFixedBytes;
  for (const auto* field :
       {&p.scope_kind, &p.scope_id, &p.source, &p.consumer, &p.message_id, &p.event_type, &p.fingerprint})
    bytes += PgArrayBuilder::element_bytes(*field);
  // Payload and metadata are elements of JSON arrays, as they are, with a separator.
  bytes += p.canonical_payload.size() + 1 + p.metadata_json.size() + 1;
  bytes += p.ordering_key ? PgArrayBuilder::element_bytes(*p.ordering_key) : 5;  // NULL and a separator
  return bytes;
}

std::string identity_key(std::string_view consumer, std::string_view source, std::string_view scope_kind,
                         std::string_view scope_id, std::string_view message_id) {
  std::string key;
  key.reserve(consumer.size() + source.size() + scope_kind.size() + scope_id.size() + message_id.size() + 5);
  // U+0000 cannot occur inside a validated field, so it separates them unambiguously.
  for (const auto part : {consumer, source, scope_kind, scope_id, message_id}) {
    key += part;
    key += '\0';
  }
  return key;
}

std::string PreparedRequest::identity_key() const {
  return detail::identity_key(consumer, source, scope_kind, scope_id, message_id);
}

void check_text_field(const std::string& value, const char* field, bool required) {
  if (value.empty()) {
    if (required) throw InboxValidationError("INBOX_FIELD_REQUIRED", field, "must not be empty");
    return;
  }
  if (value.size() > kMaxIdentityBytes)
    throw InboxValidationError(
        "INBOX_FIELD_TOO_LONG", field,
        "is " + std::to_string(value.size()) + " bytes; the limit is " + std::to_string(kMaxIdentityBytes));
  if (!is_valid_utf8(value)) throw InboxValidationError("INBOX_FIELD_INVALID", field, "is not valid UTF-8");
  if (value.find('\0') != std::string::npos)
    throw InboxValidationError("INBOX_FIELD_INVALID", field, "contains U+0000");
}

PreparedRequest prepare_request(const AcceptRequest& request, const AcceptRules& rules) {
  PreparedRequest prepared;
  if (request.scope.kind == Scope::Kind::Tenant) {
    if (request.scope.id.empty())
      throw InboxValidationError("INBOX_SCOPE_INVALID", "scope.id",
                                 "a tenant scope needs the verified tenant id; use "
                                 "Scope::global() for intentionally global messages");
    check_text_field(request.scope.id, "scope.id", true);
  } else if (!request.scope.id.empty()) {
    throw InboxValidationError("INBOX_SCOPE_INVALID", "scope.id", "a global scope carries no tenant id");
  }
  check_text_field(request.source, "source", true);
  check_text_field(request.consumer, "consumer", true);
  check_text_field(request.message_id, "message_id", true);
  check_text_field(request.event_type, "event_type", true);
  if (!rules.consumers.contains(request.consumer))
    throw InboxValidationError("INBOX_UNKNOWN_CONSUMER", "consumer",
                               "'" + request.consumer + "' is not among the consumers this inbox declares");
  if (request.schema_version < 1)
    throw InboxValidationError("INBOX_SCHEMA_VERSION_INVALID", "schema_version",
                               "must be at least 1, got " + std::to_string(request.schema_version));

  try {
    prepared.canonical_payload = canonicalize(request.payload, rules.payload_limits);
  } catch (const JsonValueError& e) {
    throw InboxValidationError(e.code(), "payload" + e.path(), e.what());
  }
  prepared.metadata_json = metadata_json(request.metadata);

  prepared.scope_kind = to_string(request.scope.kind);
  prepared.scope_id = request.scope.id;
  prepared.source = request.source;
  prepared.consumer = request.consumer;
  prepared.message_id = request.message_id;
  prepared.event_type = request.event_type;
  prepared.schema_version = request.schema_version;
  prepared.fingerprint = content_fingerprint(prepared.event_type, prepared.schema_version, prepared.canonical_payload);
  if (const auto rule = rules.ordering.find(request.consumer); rule != rules.ordering.end()) {
    prepared.ordering_key = ordering_key_of(rule->second, request);
    prepared.park_after = rule->second.head_of_line.park_after_attempts();
  }
  // A batch is split into statements of at most max_statement_bytes; an item over it
  // alone would fail the same way on every redelivery, so it is invalid, not a storage error.
  prepared.batch_bytes = batch_item_bytes(prepared);
  if (const std::size_t bytes = prepared.batch_bytes; bytes > rules.max_statement_bytes)
    throw InboxValidationError("INBOX_ITEM_TOO_LARGE", "payload",
                               "the item is " + std::to_string(bytes) +
                                   " bytes as stored (payload, metadata and identity); the limit per statement is " +
                                   std::to_string(rules.max_statement_bytes) + " (InboxOptions::max_statement_bytes)");
  return prepared;
}

}  // namespace boxcar::detail
