// The mock cluster and the read-back consumer.
#include "boxcar/testing/mock_kafka.hpp"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <algorithm>
#include <set>
#include <stdexcept>

namespace boxcar::testing {

struct MockKafka::Cluster {
  rd_kafka_t* handle = nullptr;
  rd_kafka_mock_cluster_t* cluster = nullptr;
  int brokers = 0;
};

MockKafka::MockKafka(int brokers) : cluster_(std::make_unique<Cluster>()) {
  cluster_->brokers = brokers;
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "0", error, sizeof error);
  // The mock brokers' sockets take this handle's setting: without it, quiet connections
  // stall 40 ms per response (Nagle + delayed ACK) and latencies turn bimodal.
  rd_kafka_conf_set(conf, "socket.nagle.disable", "true", error, sizeof error);
  cluster_->handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (!cluster_->handle) throw std::runtime_error(std::string("mock kafka: ") + error);
  cluster_->cluster = rd_kafka_mock_cluster_new(cluster_->handle, brokers);
  if (!cluster_->cluster) {
    rd_kafka_destroy(cluster_->handle);
    throw std::runtime_error("mock kafka: cannot create the cluster");
  }
}

MockKafka::~MockKafka() {
  rd_kafka_mock_cluster_destroy(cluster_->cluster);
  rd_kafka_destroy(cluster_->handle);
}

std::string MockKafka::bootstrap_servers() const { return rd_kafka_mock_cluster_bootstraps(cluster_->cluster); }

void MockKafka::create_topic(const std::string& topic, int partitions) {
  rd_kafka_mock_topic_create(cluster_->cluster, topic.c_str(), partitions, std::min(cluster_->brokers, 3));
}

void MockKafka::set_all_down(bool down) {
  for (int id = 1; id <= cluster_->brokers; ++id) {
    if (down)
      rd_kafka_mock_broker_set_down(cluster_->cluster, id);
    else
      rd_kafka_mock_broker_set_up(cluster_->cluster, id);
  }
}

void MockKafka::set_broker_down(int broker, bool down) {
  if (down)
    rd_kafka_mock_broker_set_down(cluster_->cluster, broker);
  else
    rd_kafka_mock_broker_set_up(cluster_->cluster, broker);
}

void MockKafka::set_partition_leader(const std::string& topic, int partition, int broker) {
  rd_kafka_mock_partition_set_leader(cluster_->cluster, topic.c_str(), partition, broker);
}

void MockKafka::fail_next_produce_requests(int count, int error) {
  constexpr int16_t kProduceApiKey = 0;  // the Kafka protocol's ProduceRequest
  for (int i = 0; i < count; ++i)
    rd_kafka_mock_push_request_errors(cluster_->cluster, kProduceApiKey, 1, static_cast<rd_kafka_resp_err_t>(error));
}

std::vector<KafkaRecordRead> MockKafka::read_all(const std::string& topic, std::size_t expected,
                                                 std::chrono::milliseconds timeout) const {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const auto set = [&](const char* name, const std::string& value) {
    if (rd_kafka_conf_set(conf, name, value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK)
      throw std::runtime_error(error);
  };
  set("bootstrap.servers", bootstrap_servers());
  set("group.id", "boxcar-test-reader");
  set("enable.auto.commit", "false");
  set("auto.offset.reset", "earliest");
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  if (!consumer) throw std::runtime_error(error);
  rd_kafka_poll_set_consumer(consumer);

  // Assign every partition from the beginning (no group rebalance to wait for).
  const rd_kafka_metadata_t* metadata = nullptr;
  rd_kafka_topic_t* handle = rd_kafka_topic_new(consumer, topic.c_str(), nullptr);
  int partitions = 0;
  for (int attempt = 0; attempt < 50 && partitions == 0; ++attempt) {
    if (rd_kafka_metadata(consumer, 0, handle, &metadata, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      if (metadata->topic_cnt == 1) partitions = metadata->topics[0].partition_cnt;
      rd_kafka_metadata_destroy(metadata);
    }
  }
  rd_kafka_topic_destroy(handle);
  rd_kafka_topic_partition_list_t* assignment = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(assignment, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(consumer, assignment);
  rd_kafka_topic_partition_list_destroy(assignment);

  // librdkafka 2.0.2 can redeliver after offset validation: count (partition, offset).
  std::set<std::pair<int, std::int64_t>> seen;
  std::vector<KafkaRecordRead> records;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto last_record = std::chrono::steady_clock::now();
  // Past `expected`, keep reading until the topic is quiet for a second: duplicates count.
  while (std::chrono::steady_clock::now() < deadline &&
         (records.size() < expected || std::chrono::steady_clock::now() - last_record < std::chrono::seconds(1))) {
    rd_kafka_message_t* message = rd_kafka_consumer_poll(consumer, 100);
    if (!message) continue;
    last_record = std::chrono::steady_clock::now();
    if (message->err == RD_KAFKA_RESP_ERR_NO_ERROR && seen.emplace(message->partition, message->offset).second) {
      KafkaRecordRead r;
      r.topic = topic;
      r.partition = message->partition;
      r.offset = message->offset;
      if (message->key) r.key.assign(static_cast<const char*>(message->key), message->key_len);
      if (message->payload) r.value.assign(static_cast<const char*>(message->payload), message->len);
      rd_kafka_headers_t* headers = nullptr;
      if (rd_kafka_message_headers(message, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name;
        const void* value;
        size_t size;
        for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
          r.headers[name] = std::string(static_cast<const char*>(value), size);
      }
      records.push_back(std::move(r));
    }
    rd_kafka_message_destroy(message);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  return records;
}

}  // namespace boxcar::testing
