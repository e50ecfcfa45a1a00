// A Kafka consumer that hands each poll batch to a callback and commits the batch's
// offsets only after the callback returned normally: the transport side of "accept
// before acknowledging".
//
//   callback returns               the records it names go to the dead-letter topic
//                                  (delivery confirmed), then the batch's offsets commit
//   callback throws                nothing is committed or dead-lettered; the consumer
//   (storage failure)              seeks back and the batch is consumed again
//   dead letters not confirmed     like a throw: a crash must not lose a poison record
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace orders {

struct KafkaRecord {
  std::string topic{};
  int partition = 0;
  long long offset = 0;
  std::string key;
  std::string value;
  /// A null key or value (a tombstone) stays null in a dead letter.
  bool null_key = false;
  bool null_value = false;
  /// In record order, repeats included (they are copied to a dead letter unchanged).
  std::vector<std::pair<std::string, std::string>> headers;

  /// The last value of header `name` (as Kafka's Java client's lastHeader), or nullopt.
  std::optional<std::string> header(const std::string& name) const;
};

/// A record of the batch that can never be accepted: invalid, or an identity reused for
/// other content. `index` is its position in the batch; `code` and `message` travel in
/// the dead letter's headers.
struct DeadLetter {
  std::size_t index = 0;
  std::string code;
  std::string message;
};

struct ConsumerOptions {
  std::string bootstrap_servers{};
  std::string group_id{};
  /// A topic name, or a librdkafka regex subscription when it starts with '^'.
  std::string topic{};
  /// Where dead letters go; empty: "<topic>.dlq" (required for a regex subscription).
  std::string dead_letter_topic{};
  /// How long producing a batch's dead letters may take before the batch is retried.
  std::chrono::milliseconds dead_letter_timeout{30000};
  std::size_t max_batch = 100;
  std::chrono::milliseconds poll_timeout{200};
  /// Stop after this long without records (0: never), counted from the first record.
  std::chrono::milliseconds idle_exit{0};
  /// With idle_exit: how long to wait for the first record before giving up.
  std::chrono::milliseconds first_record_wait{30000};

  /// dead_letter_topic, or its default. @throws std::invalid_argument when it has none.
  std::string dead_letters() const;
};

/// What `handle` returns for a batch: the records to dead-letter (the rest were
/// accepted or are duplicates). Throwing instead means "not acknowledged".
using BatchHandler = std::function<std::vector<DeadLetter>(const std::vector<KafkaRecord>&)>;

/// Consumes until `stop` is set or the topic has been idle for idle_exit. Each batch
/// goes to `handle`; then its dead letters are produced and confirmed, and only then are
/// the batch's offsets committed (synchronously).
/// Dead-letter headers: the original headers, then dlq.error.code, dlq.error.message,
/// dlq.original.topic, dlq.original.partition, dlq.original.offset, dlq.consumer.group;
/// key and value unchanged.
void consume_batches(const ConsumerOptions& options, const std::atomic<bool>& stop, const BatchHandler& handle);

}  // namespace orders
