// The publisher's current KafkaProducer and its replacement after a fatal idempotence
// error (librdkafka 2.0.2 cannot recover one: docs/publisher.md). The publishing thread
// produces and awaits through it, and fault drills reach the same producer from other
// threads, so every use holds one mutex. That mutex is held for a whole await (up to the
// delivery timeout): the readiness check only reads which producer is current, under a
// second mutex that nothing holds for longer than a pointer copy.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kafka_producer.hpp"

namespace boxcar::detail {

class ProducerSlot {
 public:
  /// @throws ConfigError("kafka.<name>") for a property librdkafka rejects.
  ProducerSlot(std::map<std::string, std::string> properties, std::chrono::milliseconds delivery_timeout);

  /// KafkaProducer::produce on the current producer.
  std::uint32_t produce(const std::vector<KafkaRecord>& records);
  /// KafkaProducer::complete on the current producer.
  bool complete(std::uint32_t batch);

  struct Awaited {
    std::vector<DeliveryOutcome> outcomes;
    /// Set when the producer had turned fatal and was replaced: why it failed.
    std::optional<std::string> replaced_after;
  };
  /// KafkaProducer::await on the current producer; then, when it is fatal and
  /// `replace_if_fatal` (no other batch of it is still in flight), destroys it and makes
  /// a new one, in the same critical section.
  Awaited await(std::uint32_t batch, std::chrono::milliseconds wait, bool replace_if_fatal);

  bool fatal();
  /// The current producer, kept alive by the copy while a slow call (metadata) runs
  /// outside the lock. Never waits for a produce or an await in progress.
  std::shared_ptr<KafkaProducer> current();
  void raise_fatal_error(const std::string& reason);

 private:
  const std::map<std::string, std::string> properties_;
  const std::chrono::milliseconds delivery_timeout_;
  std::mutex mutex_;  // serialises every call on the producer
  std::shared_ptr<KafkaProducer> producer_;
  std::mutex current_mutex_;  // guards only replacing producer_ and copying it in current()
};

}  // namespace boxcar::detail
