// An idempotent librdkafka producer that sends one batch at a time and reports, per
// record, whether its delivery report arrived without error. rdkafka.h stays here.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <librdkafka/rdkafka.h>

namespace boxcar::detail {

struct KafkaRecord {
  std::string topic;
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
};

struct DeliveryOutcome {
  bool delivered = false;
  /// Why not, when !delivered: the delivery report's error, or why no report came.
  std::string error;
};

class KafkaProducer {
 public:
  /// @throws ConfigError("kafka.<name>") for a property librdkafka rejects.
  KafkaProducer(const std::map<std::string, std::string>& properties, std::chrono::milliseconds delivery_timeout);
  ~KafkaProducer();
  KafkaProducer(const KafkaProducer&) = delete;
  KafkaProducer& operator=(const KafkaProducer&) = delete;

  /// Produces every record and waits for all their delivery reports (at most
  /// `wait` long). A record whose report did not come in time is purged and reported
  /// undelivered: it may still have been written, which a retry turns into a duplicate
  /// with the same event id, never into a loss.
  std::vector<DeliveryOutcome> send(const std::vector<KafkaRecord>& records, std::chrono::milliseconds wait);

  /// True after an idempotence fatal error: this producer must be replaced.
  bool fatal() const noexcept { return fatal_; }
  std::string fatal_reason() const;
  /// Asks a broker for metadata (at most `timeout`): true when one answered.
  bool connected(std::chrono::milliseconds timeout) const;
  void raise_fatal_error(const std::string& reason);

 private:
  void check_fatal();
  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque);
  static void on_error(rd_kafka_t*, int error, const char* reason, void* opaque);

  rd_kafka_t* handle_ = nullptr;
  std::atomic<bool> fatal_{false};
  std::string fatal_reason_;
  // Per-send state, written by the delivery callback (which runs inside rd_kafka_poll on
  // the sending thread).
  std::vector<DeliveryOutcome>* outcomes_ = nullptr;
  std::size_t pending_ = 0;
  // Each send() tags its records with a new generation, so a late (purged) report of an
  // earlier batch can never be taken for a record of this one.
  std::uint32_t generation_ = 0;
};

}  // namespace boxcar::detail
