// librdkafka's mock cluster, started in the test process and reached over TCP on
// loopback by publishers in this or other processes, plus a real consumer to read
// back what was produced and the faults the mock can inject. For an application's Kafka
// tests as much as for Boxcar's own; librdkafka stays out of this header (pimpl).
//
//   boxcar::testing::MockKafka kafka;
//   kafka.create_topic("orders.events");
//   config.kafka_bootstrap_servers = kafka.bootstrap_servers();
//   ... publish ...
//   CHECK(kafka.read_all("orders.events", 3, 10s).size() == 3);
//
// Thread-safety: const members may be called from any thread; the fault switches are
// meant for the test's own thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

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
  /// Starts `brokers` mock brokers on loopback ports.
  /// @throws std::runtime_error when librdkafka cannot create the cluster.
  explicit MockKafka(int brokers = 3);
  ~MockKafka();
  MockKafka(const MockKafka&) = delete;
  MockKafka& operator=(const MockKafka&) = delete;

  /// "127.0.0.1:port,..." for bootstrap.servers.
  std::string bootstrap_servers() const;
  void create_topic(const std::string& topic, int partitions = 4);
  /// Every broker down / up (clients see connection refused).
  void set_all_down(bool down);
  /// One broker (id 1 .. brokers) down / up: the partitions it leads are unreachable.
  void set_broker_down(int broker, bool down);
  /// Makes `broker` the leader of `topic`'s `partition` (clients follow after a metadata refresh).
  void set_partition_leader(const std::string& topic, int partition, int broker);
  /// The next `count` Produce requests fail with `error` (an rd_kafka_resp_err_t value).
  void fail_next_produce_requests(int count, int error);

  /// Reads `topic` from the beginning until at least `expected` distinct (partition,
  /// offset) records arrived and the topic was then quiet for a second, or `timeout`
  /// passed; returns what it read, one entry per record (duplicates included).
  std::vector<KafkaRecordRead> read_all(const std::string& topic, std::size_t expected,
                                        std::chrono::milliseconds timeout) const;

 private:
  struct Cluster;  // the librdkafka handle and its mock cluster
  std::unique_ptr<Cluster> cluster_;
};

}  // namespace boxcar::testing
