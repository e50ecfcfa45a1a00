// A Kafka consumer that hands each poll batch to a callback and commits the batch's
// offsets only after the callback returned normally: the transport side of "accept
// before acknowledging". A callback that throws (storage failure) leaves the offsets
// uncommitted and the batch is consumed again after a seek back.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace orders {

struct KafkaRecord {
  std::string topic{};
  int partition = 0;
  long long offset = 0;
  std::string key;
  std::string value;
  std::map<std::string, std::string> headers;
};

struct ConsumerOptions {
  std::string bootstrap_servers{};
  std::string group_id{};
  std::string topic{};
  std::size_t max_batch = 100;
  std::chrono::milliseconds poll_timeout{200};
  /// Stop after this long without records (0: never), counted from the first record.
  std::chrono::milliseconds idle_exit{0};
  /// With idle_exit: how long to wait for the first record before giving up.
  std::chrono::milliseconds first_record_wait{30000};
};

/// Consumes until `stop` is set or the topic has been idle for idle_exit.
/// `handle` gets each batch; when it returns, the batch's offsets are committed.
void consume_batches(const ConsumerOptions& options, const std::atomic<bool>& stop,
                     const std::function<void(const std::vector<KafkaRecord>&)>& handle);

}  // namespace orders
