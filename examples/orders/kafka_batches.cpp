// librdkafka consumer loop with commit-after-accept.
#include "kafka_batches.hpp"

#include <librdkafka/rdkafka.h>

#include <optional>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

namespace orders {
namespace {

rd_kafka_t* make_consumer(const ConsumerOptions& options) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] : std::map<std::string, std::string>{
           {"bootstrap.servers", options.bootstrap_servers},
           {"group.id", options.group_id},
           {"enable.auto.commit", "false"},  // offsets move only after accept()
           {"auto.offset.reset", "earliest"},
           // A replacement consumer gets a dead member's partitions within seconds.
           {"session.timeout.ms", "6000"},
           {"heartbeat.interval.ms", "500"},
           {"socket.nagle.disable", "true"},
           {"log_level", "3"}})
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK)
      throw std::runtime_error(error);
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  if (!consumer) throw std::runtime_error(error);
  rd_kafka_poll_set_consumer(consumer);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, options.topic.c_str(), RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(consumer, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  return consumer;
}

KafkaRecord to_record(const rd_kafka_message_t* m) {
  KafkaRecord r;
  r.topic = rd_kafka_topic_name(m->rkt);
  r.partition = m->partition;
  r.offset = m->offset;
  if (m->key) r.key.assign(static_cast<const char*>(m->key), m->key_len);
  if (m->payload) r.value.assign(static_cast<const char*>(m->payload), m->len);
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
      r.headers[name] = std::string(static_cast<const char*>(value), size);
  }
  return r;
}

}  // namespace

void consume_batches(const ConsumerOptions& options, const std::atomic<bool>& stop,
                     const std::function<void(const std::vector<KafkaRecord>&)>& handle) {
  rd_kafka_t* consumer = make_consumer(options);
  // The idle clock starts with the first record: joining the group takes a while.
  const auto started = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> last_record;
  while (!stop) {
    std::vector<KafkaRecord> batch;
    std::map<std::pair<std::string, int>, long long> next_offsets;  // per partition: last offset + 1
    std::map<std::pair<std::string, int>, long long> first_offsets;
    const auto batch_end = std::chrono::steady_clock::now() + options.poll_timeout;
    while (batch.size() < options.max_batch && std::chrono::steady_clock::now() < batch_end) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 50);
      if (!m) continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        batch.push_back(to_record(m));
        const auto key = std::make_pair(batch.back().topic, m->partition);
        next_offsets[key] = m->offset + 1;
        first_offsets.emplace(key, m->offset);
      }
      rd_kafka_message_destroy(m);
    }
    if (batch.empty()) {
      const auto now = std::chrono::steady_clock::now();
      if (options.idle_exit.count() > 0 &&
          (last_record ? now - *last_record > options.idle_exit : now - started > options.first_record_wait))
        break;
      continue;
    }
    last_record = std::chrono::steady_clock::now();
    try {
      handle(batch);
    } catch (const std::exception& e) {
      // Not acknowledged: rewind so the same records are consumed (and accepted) again.
      spdlog::warn("batch not accepted, it will be consumed again: {}", e.what());
      for (const auto& [key, offset] : first_offsets) {
        rd_kafka_topic_t* topic = rd_kafka_topic_new(consumer, key.first.c_str(), nullptr);
        rd_kafka_seek(topic, key.second, offset, 5000);
        rd_kafka_topic_destroy(topic);
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    rd_kafka_topic_partition_list_t* offsets = rd_kafka_topic_partition_list_new(static_cast<int>(next_offsets.size()));
    for (const auto& [key, offset] : next_offsets)
      rd_kafka_topic_partition_list_add(offsets, key.first.c_str(), key.second)->offset = offset;
    rd_kafka_commit(consumer, offsets, 0);  // synchronous: acknowledged only after accept
    rd_kafka_topic_partition_list_destroy(offsets);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
}

}  // namespace orders
