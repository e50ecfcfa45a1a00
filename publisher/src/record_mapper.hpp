// Outbox row → Kafka record: topic (the event's, or its type's override), key, the
// reserved headers (boxcar/outbox/reserved_headers.hpp) after the emit's own, and the
// canonical JSON payload as the value.
#pragma once

#include <map>
#include <string>

#include "event_store.hpp"
#include "kafka_record.hpp"

namespace boxcar::detail {

class RecordMapper {
 public:
  /// `topic_overrides`: event type → topic (PublisherOptions::topic_overrides).
  explicit RecordMapper(std::map<std::string, std::string> topic_overrides);

  /// Moves the payload out of `event` (the batch would otherwise hold it twice until
  /// produced); its other fields stay.
  /// @throws nlohmann::json::exception if the stored headers are not a JSON object of
  ///   strings (the emitter never stores such).
  KafkaRecord map(ClaimedEvent& event) const;

 private:
  std::map<std::string, std::string> topic_overrides_;
};

/// The record's size as librdkafka counts it against message.max.bytes, from above
/// (boxcar/outbox/record_size.hpp): what the in-flight byte budget counts.
std::size_t record_bytes(const KafkaRecord& record);

}  // namespace boxcar::detail
