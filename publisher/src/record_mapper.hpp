// Outbox row → Kafka record: topic (the event's, or its type's override), key, the
// reserved headers (boxcar/outbox/reserved_headers.hpp) after the emit's own, and the
// canonical JSON payload as the value.
#pragma once

#include <map>
#include <set>
#include <string>

#include "event_store.hpp"
#include "kafka_record.hpp"

namespace boxcar::detail {

class RecordMapper {
 public:
  /// `topic_overrides`: event type → topic (PublisherOptions::topic_overrides);
  /// `allowed_topics`: PublisherOptions::allowed_topics (empty: every topic).
  RecordMapper(std::map<std::string, std::string> topic_overrides, std::set<std::string> allowed_topics);

  /// Whether a record may go to `topic` (a mapped record's topic).
  bool allowed(const std::string& topic) const;
  /// The topic label of the publisher's metrics for a row's stored `topic`: itself when
  /// allowed_topics is empty or holds it, else "(other)" (an event delivered through an
  /// override, or refused), so rows with arbitrary topics add no series.
  const std::string& topic_label(const std::string& topic) const;

  /// Moves the payload out of `event` (the batch would otherwise hold it twice until
  /// produced); its other fields stay.
  /// @throws OutboxValidationError (OUTBOX_FIELD_INVALID, field "headers" or
  ///   "headers/<name>") when the stored headers are not what the emitter stores: a JSON
  ///   object of strings, no name empty or reserved. Such a row was written by other
  ///   means; `event` is then unchanged.
  KafkaRecord map(ClaimedEvent& event) const;

 private:
  std::map<std::string, std::string> topic_overrides_;
  std::set<std::string> allowed_topics_;
};

/// The record's size as librdkafka counts it against message.max.bytes, from above
/// (boxcar/outbox/record_size.hpp): what the in-flight byte budget counts.
std::size_t record_bytes(const KafkaRecord& record);

}  // namespace boxcar::detail
