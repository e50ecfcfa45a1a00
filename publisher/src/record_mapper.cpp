// The mapping from a claimed outbox row to the record the producer sends.
#include "record_mapper.hpp"

#include <nlohmann/json.hpp>

#include "boxcar/outbox/errors.hpp"
#include "boxcar/outbox/record_size.hpp"
#include "boxcar/outbox/reserved_headers.hpp"

namespace boxcar::detail {

namespace {

// The emit's custom headers as the emitter stores them (outbox/src/outbox_emitter.cpp): a
// JSON object of strings whose names are neither empty nor reserved, so none is set twice.
std::vector<std::pair<std::string, std::string>> custom_headers(const std::string& headers_json) {
  const auto invalid = [](std::string field, const std::string& message) {
    return OutboxValidationError("OUTBOX_FIELD_INVALID", std::move(field), message);
  };
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(headers_json);
  } catch (const nlohmann::json::parse_error& e) {
    throw invalid("headers", std::string("not JSON: ") + e.what());
  }
  if (!object.is_object())
    throw invalid("headers", std::string("must be a JSON object of strings, found ") + object.type_name());
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(object.size());
  for (const auto& [name, value] : object.items()) {
    if (name.empty()) throw invalid("headers", "header names must not be empty");
    if (headers::is_reserved(name))
      throw invalid("headers/" + name, "reserved: the publisher sets it from the event's own field");
    if (!value.is_string())
      throw invalid("headers/" + name, std::string("must be a string, found ") + value.type_name());
    out.emplace_back(name, value.get<std::string>());
  }
  return out;
}

}  // namespace

RecordMapper::RecordMapper(std::map<std::string, std::string> topic_overrides, std::set<std::string> allowed_topics)
    : topic_overrides_(std::move(topic_overrides)), allowed_topics_(std::move(allowed_topics)) {}

bool RecordMapper::allowed(const std::string& topic) const {
  return allowed_topics_.empty() || allowed_topics_.contains(topic);
}

const std::string& RecordMapper::topic_label(const std::string& topic) const {
  static const std::string other = "(other)";
  return allowed(topic) ? topic : other;
}

KafkaRecord RecordMapper::map(ClaimedEvent& event) const {
  KafkaRecord record;
  // Checked before anything moves out of `event`: a row the emitter would have refused
  // (written by other means) fails alone, with the emitter's own error for it.
  record.headers = custom_headers(event.headers_json);
  const auto override = topic_overrides_.find(event.event_type);
  record.topic = override != topic_overrides_.end() ? override->second : event.topic;
  record.key = event.message_key;
  record.value = std::move(event.payload);
  auto& h = record.headers;
  const auto add = [&](std::string_view name, const std::string& value) { h.emplace_back(name, value); };
  add(headers::kEventId, event.event_id);
  add(headers::kEventType, event.event_type);
  add(headers::kSchemaVersion, std::to_string(event.schema_version));
  add(headers::kTenantScope, event.tenant_scope);
  // Absent rather than empty: consumers test for presence.
  const auto optional = [&](std::string_view name, const std::string& value) {
    if (!value.empty()) add(name, value);
  };
  optional(headers::kTenantId, event.tenant_id);
  optional(headers::kCausationId, event.causation_id);
  optional(headers::kCorrelationId, event.correlation_id);
  optional(headers::kTraceparent, event.traceparent);
  return record;
}

std::size_t record_bytes(const KafkaRecord& record) {
  RecordSize size(record.key.size(), record.value.size());
  for (const auto& [name, value] : record.headers) size.header(name, value.size());
  return size.bytes();
}

}  // namespace boxcar::detail
