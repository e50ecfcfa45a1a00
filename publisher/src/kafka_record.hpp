// One Kafka record as the publisher produces it: what RecordMapper builds from an outbox
// row and KafkaProducer sends. Free of rdkafka.h.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace boxcar::detail {

struct KafkaRecord {
  std::string topic;
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
};

}  // namespace boxcar::detail
