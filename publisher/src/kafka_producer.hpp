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

#include "kafka_record.hpp"

namespace boxcar::detail {

struct DeliveryOutcome {
  bool delivered = false;
  /// Why not, when !delivered: the delivery report's error, or why no report came.
  std::string error;
  /// The record can never be produced as it is (larger than message.max.bytes).
  bool permanent = false;
};

class KafkaProducer {
 public:
  /// @throws ConfigError("kafka.<name>") for a property librdkafka rejects.
  KafkaProducer(const std::map<std::string, std::string>& properties, std::chrono::milliseconds delivery_timeout);
  ~KafkaProducer();
  KafkaProducer(const KafkaProducer&) = delete;
  KafkaProducer& operator=(const KafkaProducer&) = delete;

  /// Starts producing `records` as one batch and returns its id; delivery reports are
  /// collected by await(). Several batches may be in flight.
  std::uint32_t produce(const std::vector<KafkaRecord>& records);

  /// Waits (at most `wait`) until every record of `batch` has its delivery report and
  /// returns one outcome per record, in order. When time runs out, or the producer turns
  /// fatal, everything still in flight (of every batch) is purged and reported
  /// undelivered: such a record may still have been written, which a retry turns into a
  /// duplicate with the same event id, never into a loss. The other batches lose nothing
  /// by it when, as in BatchPipeline, they were all produced before this wait began and
  /// `wait` exceeds message.timeout.ms: their records still without a report are past
  /// their own timeout, and can only fail.
  std::vector<DeliveryOutcome> await(std::uint32_t batch, std::chrono::milliseconds wait);

  /// Serves waiting delivery reports without blocking; true when `batch` has them all.
  bool complete(std::uint32_t batch);

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
  struct Batch {
    std::vector<DeliveryOutcome> outcomes;
    std::size_t pending = 0;
  };
  // Batches in flight by id; the delivery callback runs inside rd_kafka_poll() on the
  // thread that calls produce()/await(), so no lock is needed. A report whose batch is
  // gone (purged, abandoned) is ignored: it can never be taken for a newer record.
  std::map<std::uint32_t, Batch> batches_;
  std::uint32_t next_batch_ = 0;
};

}  // namespace boxcar::detail
