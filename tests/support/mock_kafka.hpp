// librdkafka's mock cluster, started in the test process and reached over TCP on
// loopback by publishers in this or other processes, plus a real consumer to read
// back what was produced and the faults the mock can inject.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_mock_cluster_s rd_kafka_mock_cluster_t;

namespace boxcar::testing {

struct KafkaRecordRead {
  std::string topic;
  int partition = 0;
  std::int64_t offset = 0;
  std::string key;
  std::string value;
  std::map<std::string, std::string> headers;
};

class MockKafka {
 public:
  explicit MockKafka(int brokers = 3);
  ~MockKafka();
  MockKafka(const MockKafka&) = delete;
  MockKafka& operator=(const MockKafka&) = delete;

  /// "127.0.0.1:port,..." for bootstrap.servers.
  std::string bootstrap_servers() const;
  void create_topic(const std::string& topic, int partitions = 4);
  /// Every broker down / up (clients see connection refused).
  void set_all_down(bool down);
  /// The next `count` Produce requests fail with `error` (an rd_kafka_resp_err_t value).
  void fail_next_produce_requests(int count, int error);

  /// Reads `topic` from the beginning until at least `expected` distinct (partition,
  /// offset) records arrived and the topic was then quiet for a second, or `timeout`
  /// passed; returns what it read, one entry per record (duplicates included).
  std::vector<KafkaRecordRead> read_all(const std::string& topic, std::size_t expected,
                                        std::chrono::milliseconds timeout) const;

 private:
  rd_kafka_t* handle_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  int brokers_;
};

}  // namespace boxcar::testing
