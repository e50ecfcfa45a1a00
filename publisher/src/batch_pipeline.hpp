// The publishing pipeline: up to max_in_flight_batches claimed batches, and at most
// max_in_flight_bytes of records, with the producer at once, finished (marked) in claim
// order, so the database work of one batch overlaps the Kafka round trips of the others. Used by one thread at a time (the publishing
// thread, or drain()'s caller).
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <spdlog/fwd.h>

#include "boxcar/publisher/publisher.hpp"
#include "event_store.hpp"
#include "producer_slot.hpp"
#include "publisher_counters.hpp"
#include "record_mapper.hpp"

namespace boxcar::detail {

/// dead_reason of an event whose stored row the publisher cannot turn into a record.
inline constexpr std::string_view kRecordMalformed = "RECORD_MALFORMED";

class BatchPipeline {
 public:
  /// Keeps references: every argument outlives the pipeline (members of Publisher::Impl).
  BatchPipeline(EventStore& store, const RecordMapper& mapper, ProducerSlot& producer, const PublisherOptions& options,
                PublisherCounters& counters, std::shared_ptr<spdlog::logger> log);

  /// Claims the next batch (unless the batches in flight use up the byte budget) and
  /// starts producing it, then finishes the batches whose delivery reports are all in,
  /// and the oldest one when the pipeline is full or nothing was claimed. Returns how
  /// many events it claimed.
  std::size_t step();
  /// Finishes every batch in flight (their reports, or the delivery timeout).
  void finish_all();
  bool empty() const noexcept { return in_flight_.empty(); }
  /// Forgets the batches in flight without marking them (the database is unreachable):
  /// their leases expire and lease recovery makes them due again.
  void abandon();

 private:
  struct InFlightEvent {
    std::string event_id;
    std::string topic;
  };
  // A claimed batch whose records are with the producer.
  struct InFlight {
    std::string token;
    std::vector<InFlightEvent> events;
    std::uint32_t id;
    std::size_t bytes;  // record_bytes() of its records
  };

  std::size_t start_batch();
  void finish_oldest();
  void mark(const InFlight& batch, const std::vector<DeliveryOutcome>& outcomes);
  void set_in_flight_events(std::size_t count);
  // Events of a batch made DEAD before it is produced, each with its own error text.
  struct Refusals {
    std::vector<std::string> event_ids;
    std::vector<std::string> errors;
    void add(std::string event_id, std::string error) {
      event_ids.push_back(std::move(event_id));
      errors.push_back(std::move(error));
    }
  };
  /// Events whose topic is outside allowed_topics: DEAD (TOPIC_NOT_ALLOWED), never produced.
  void refuse(const Refusals& refusals, const std::string& token);
  /// Events whose row cannot be a record (headers the emitter never stores): DEAD
  /// (RECORD_MALFORMED), never produced.
  void refuse_malformed(const Refusals& refusals, const std::string& token);
  void record_failures(const InFlight& batch, const std::vector<std::string>& event_ids, const std::string& error,
                       const std::string& first_event_id, bool permanent);

  EventStore& store_;
  const RecordMapper& mapper_;
  ProducerSlot& producer_;
  const PublisherOptions& options_;
  PublisherCounters& counters_;
  std::shared_ptr<spdlog::logger> log_;
  std::deque<InFlight> in_flight_;
  std::size_t in_flight_events_ = 0;
  std::size_t in_flight_bytes_ = 0;
};

}  // namespace boxcar::detail
