// The mapping from a claimed outbox row to the record the producer sends.
#include "record_mapper.hpp"

#include <nlohmann/json.hpp>

#include "boxcar/outbox/record_size.hpp"
#include "boxcar/outbox/reserved_headers.hpp"

namespace boxcar::detail {

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
  const auto override = topic_overrides_.find(event.event_type);
  record.topic = override != topic_overrides_.end() ? override->second : event.topic;
  record.key = event.message_key;
  record.value = std::move(event.payload);
  auto& h = record.headers;
  // The emitter rejects reserved names among the custom headers, so none is set twice.
  const auto custom_headers = nlohmann::json::parse(event.headers_json);
  for (const auto& [name, value] : custom_headers.items()) h.emplace_back(name, value.get<std::string>());
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
