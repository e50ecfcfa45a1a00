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

  /// @throws nlohmann::json::exception if the stored headers are not a JSON object of
  ///   strings (the emitter never stores such).
  KafkaRecord map(const ClaimedEvent& event) const;

 private:
  std::map<std::string, std::string> topic_overrides_;
};

}  // namespace boxcar::detail
