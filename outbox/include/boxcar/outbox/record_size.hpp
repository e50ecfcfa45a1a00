// How big an event is as a Kafka record, in the bytes librdkafka counts against
// `message.max.bytes`. One definition for both ends: the emitter refuses an event whose
// record could never be produced (OUTBOX_EVENT_TOO_LARGE), and the publisher sets the
// producer's `message.max.bytes` to the same limit and counts its in-flight budget
// (publisher.max_in_flight_bytes) with the same measure.
#pragma once

#include <cstddef>
#include <string_view>

namespace boxcar {

/// librdkafka's default `message.max.bytes`: the largest record the publisher produces
/// unless `kafka.message.max.bytes` says otherwise (then pass that value to
/// OutboxOptions::max_record_bytes too; boxcar::Runtime does).
inline constexpr std::size_t kDefaultMaxRecordBytes = 1'000'000;

/// A record's framing beyond key, value and headers. librdkafka counts at most 40 bytes
/// (RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD) and the header count; rounded up, so the measure is
/// an upper bound of librdkafka's.
inline constexpr std::size_t kRecordOverheadBytes = 64;
/// Per header: the two length varints librdkafka writes (at most 5 bytes each).
inline constexpr std::size_t kHeaderOverheadBytes = 10;

/// Accumulates a record's size header by header.
class RecordSize {
 public:
  RecordSize(std::size_t key_bytes, std::size_t value_bytes) : bytes_(kRecordOverheadBytes + key_bytes + value_bytes) {}
  RecordSize& header(std::string_view name, std::size_t value_bytes) {
    bytes_ += kHeaderOverheadBytes + name.size() + value_bytes;
    return *this;
  }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  std::size_t bytes_;
};

}  // namespace boxcar
