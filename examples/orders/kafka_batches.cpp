// librdkafka consumer loop with commit-after-accept and a confirmed dead-letter topic.
#include "kafka_batches.hpp"

#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <map>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

namespace orders {
namespace {

using Clock = std::chrono::steady_clock;

void set(rd_kafka_conf_t* conf, const std::string& name, const std::string& value) {
  char error[512];
  if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK)
    throw std::runtime_error(error);
}

rd_kafka_t* make_consumer(const ConsumerOptions& options) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  for (const auto& [name, value] :
       std::map<std::string, std::string>{{"bootstrap.servers", options.bootstrap_servers},
                                          {"group.id", options.group_id},
                                          {"enable.auto.commit", "false"},  // offsets move only after accept()
                                          {"auto.offset.reset", "earliest"},
                                          // A replacement consumer gets a dead member's partitions within seconds.
                                          {"session.timeout.ms", "6000"},
                                          {"heartbeat.interval.ms", "500"},
                                          {"socket.nagle.disable", "true"},
                                          {"log_level", "3"}})
    set(conf, name, value);
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
  r.null_key = m->key == nullptr;
  r.null_value = m->payload == nullptr;
  if (m->key) r.key.assign(static_cast<const char*>(m->key), m->key_len);
  if (m->payload) r.value.assign(static_cast<const char*>(m->payload), m->len);
  rd_kafka_headers_t* headers = nullptr;
  if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    const char* name;
    const void* value;
    size_t size;
    for (size_t i = 0; rd_kafka_header_get_all(headers, i, &name, &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
      r.headers.emplace_back(name, value ? std::string(static_cast<const char*>(value), size) : std::string());
  }
  return r;
}

/// An idempotent producer for dead letters whose delivery reports are counted per
/// batch. A report arriving late for an earlier batch (after its flush timed out) only
/// carries that batch's number, so it never counts for the current one.
class DeadLetterProducer {
 public:
  explicit DeadLetterProducer(const ConsumerOptions& options) : options_(options) { create(); }
  ~DeadLetterProducer() { destroy(); }
  DeadLetterProducer(const DeadLetterProducer&) = delete;
  DeadLetterProducer& operator=(const DeadLetterProducer&) = delete;

  /// Produces one dead letter per entry and returns once every one was acknowledged by
  /// the broker. @throws std::runtime_error when any was not (within the timeout).
  void send(const std::vector<KafkaRecord>& batch, const std::vector<DeadLetter>& dead) {
    ++batch_;
    delivered_ = 0;
    failure_.clear();
    const std::string topic = options_.dead_letters();
    for (const DeadLetter& d : dead) {
      const KafkaRecord& r = batch.at(d.index);
      rd_kafka_headers_t* headers = rd_kafka_headers_new(r.headers.size() + 6);
      const auto add = [&](const std::string& name, const std::string& value) {
        rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                            static_cast<ssize_t>(value.size()));
      };
      for (const auto& [name, value] : r.headers) add(name, value);
      add("dlq.error.code", d.code);
      add("dlq.error.message", d.message);
      add("dlq.original.topic", r.topic);
      add("dlq.original.partition", std::to_string(r.partition));
      add("dlq.original.offset", std::to_string(r.offset));
      add("dlq.consumer.group", options_.group_id);
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          producer_, RD_KAFKA_V_TOPIC(topic.c_str()),
          RD_KAFKA_V_KEY(r.null_key ? nullptr : r.key.data(), r.null_key ? 0 : r.key.size()),
          RD_KAFKA_V_VALUE(r.null_value ? nullptr : const_cast<char*>(r.value.data()),
                           r.null_value ? 0 : r.value.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers),
          RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<std::uintptr_t>(batch_))), RD_KAFKA_V_END);
      if (err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        rd_kafka_headers_destroy(headers);  // owned by the message only on success
        throw std::runtime_error("dead letter to " + topic + " not queued: " + rd_kafka_err2str(err));
      }
    }
    // flush() serves the delivery reports of this thread's producer.
    rd_kafka_flush(producer_, static_cast<int>(options_.dead_letter_timeout.count()) + 5000);
    if (delivered_ == dead.size()) return;
    if (rd_kafka_fatal_error(producer_, nullptr, 0) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      // A fatal idempotent producer stays fatal: start a new one for the next attempt.
      destroy();
      create();
    }
    throw std::runtime_error("dead letters to " + topic + " not confirmed (" + std::to_string(delivered_) + " of " +
                             std::to_string(dead.size()) + "): " + (failure_.empty() ? "timed out" : failure_));
  }

 private:
  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<DeadLetterProducer*>(opaque);
    if (reinterpret_cast<std::uintptr_t>(m->_private) != self->batch_) return;
    if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR)
      ++self->delivered_;
    else if (self->failure_.empty())
      self->failure_ = rd_kafka_err2str(m->err);
  }

  void create() {
    char error[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", options_.bootstrap_servers);
    set(conf, "enable.idempotence", "true");  // acks=all: confirmed means replicated
    set(conf, "message.timeout.ms", std::to_string(options_.dead_letter_timeout.count()));
    set(conf, "socket.nagle.disable", "true");
    set(conf, "log_level", "3");
    rd_kafka_conf_set_dr_msg_cb(conf, &DeadLetterProducer::on_delivery);
    rd_kafka_conf_set_opaque(conf, this);
    producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
    if (!producer_) throw std::runtime_error(error);
  }

  void destroy() {
    if (!producer_) return;
    rd_kafka_flush(producer_, 5000);
    rd_kafka_destroy(producer_);
    producer_ = nullptr;
  }

  const ConsumerOptions& options_;
  rd_kafka_t* producer_ = nullptr;
  std::uintptr_t batch_ = 0;
  std::size_t delivered_ = 0;
  std::string failure_;
};

}  // namespace

std::optional<std::string> KafkaRecord::header(const std::string& name) const {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it)
    if (it->first == name) return it->second;
  return std::nullopt;
}

std::string ConsumerOptions::dead_letters() const {
  if (!dead_letter_topic.empty()) return dead_letter_topic;
  if (topic.starts_with("^")) throw std::invalid_argument("a regex subscription needs a dead_letter_topic");
  return topic + ".dlq";
}

void consume_batches(const ConsumerOptions& options, const std::atomic<bool>& stop, const BatchHandler& handle) {
  DeadLetterProducer dead_letters(options);
  rd_kafka_t* consumer = make_consumer(options);
  // The idle clock starts with the first record: joining the group takes a while.
  const auto started = Clock::now();
  std::optional<Clock::time_point> last_record;
  while (!stop) {
    std::vector<KafkaRecord> batch;
    std::map<std::pair<std::string, int>, long long> next_offsets;  // per partition: last offset + 1
    std::map<std::pair<std::string, int>, long long> first_offsets;
    const auto batch_end = Clock::now() + options.poll_timeout;
    while (batch.size() < options.max_batch && Clock::now() < batch_end) {
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
      const auto now = Clock::now();
      if (options.idle_exit.count() > 0 &&
          (last_record ? now - *last_record > options.idle_exit : now - started > options.first_record_wait))
        break;
      continue;
    }
    last_record = Clock::now();
    try {
      const std::vector<DeadLetter> dead = handle(batch);
      // Confirmed before the commit: once the offset moves, the dead letter is the only
      // copy of a poison record.
      if (!dead.empty()) dead_letters.send(batch, dead);
    } catch (const std::exception& e) {
      // Not acknowledged: rewind so the same records are consumed (and accepted) again.
      // Records already accepted come back as duplicates.
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
    // Synchronous: acknowledged only after accept. A failed commit only means the batch
    // is read again later, where every record is a duplicate.
    if (const rd_kafka_resp_err_t err = rd_kafka_commit(consumer, offsets, 0); err != RD_KAFKA_RESP_ERR_NO_ERROR)
      spdlog::warn("offset commit failed, the batch will be read again: {}", rd_kafka_err2str(err));
    rd_kafka_topic_partition_list_destroy(offsets);
  }
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
}

}  // namespace orders
