// The idempotent producer: configuration, batch send with delivery reports, fatal errors.
#include "kafka_producer.hpp"

#include <mutex>

#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/outbox/record_size.hpp"

namespace boxcar::detail {
namespace {
std::mutex fatal_mutex;
}  // namespace

KafkaProducer::KafkaProducer(const std::map<std::string, std::string>& properties,
                             std::chrono::milliseconds delivery_timeout) {
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  char error[512];
  const auto set = [&](const std::string& name, const std::string& value) {
    if (rd_kafka_conf_set(conf, name.c_str(), value.c_str(), error, sizeof error) != RD_KAFKA_CONF_OK) {
      rd_kafka_conf_destroy(conf);
      throw ConfigError("kafka." + name, error);
    }
  };
  // Defaults an application may override: small delivery round trips must not wait for
  // Nagle + delayed ACK (a 40 ms stall per request on quiet connections).
  set("socket.nagle.disable", "true");
  // The emitter's record limit and the producer's are one definition (record_size.hpp).
  set("message.max.bytes", std::to_string(kDefaultMaxRecordBytes));
  for (const auto& [name, value] : properties) {
    if ((name == "enable.idempotence" && value != "true") || (name == "acks" && value != "all" && value != "-1")) {
      rd_kafka_conf_destroy(conf);  // like every other exit before rd_kafka_new() owns it
      throw ConfigError("kafka." + name, "Boxcar's publisher always uses enable.idempotence=true and acks=all");
    }
    set(name, value);
  }
  // At-least-once without reordering a key: the idempotent producer retries internally;
  // Boxcar never re-produces while librdkafka still retries.
  set("enable.idempotence", "true");
  set("acks", "all");
  set("message.timeout.ms", std::to_string(delivery_timeout.count()));
  rd_kafka_conf_set_opaque(conf, this);
  rd_kafka_conf_set_dr_msg_cb(conf, &KafkaProducer::on_delivery);
  rd_kafka_conf_set_error_cb(conf, &KafkaProducer::on_error);
  // librdkafka's own log lines join the process's log (and its JSON format) instead of
  // going straight to stderr.
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t*, int level, const char* facility, const char* message) {
    static const auto log = logger("kafka");
    const auto spd = level <= 3   ? spdlog::level::err
                     : level == 4 ? spdlog::level::warn
                     : level <= 6 ? spdlog::level::info
                                  : spdlog::level::debug;
    log->log(spd, "{}: {}", facility, message);
  });
  handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  if (!handle_) {
    rd_kafka_conf_destroy(conf);
    throw ConfigError("kafka", std::string("cannot create the producer: ") + error);
  }
}

KafkaProducer::~KafkaProducer() {
  if (!handle_) return;
  rd_kafka_purge(handle_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT | RD_KAFKA_PURGE_F_NON_BLOCKING);
  batches_.clear();  // purged reports of abandoned batches are ignored
  rd_kafka_flush(handle_, 1000);
  rd_kafka_destroy(handle_);
}

void KafkaProducer::on_delivery(rd_kafka_t*, const rd_kafka_message_t* message, void* opaque) {
  auto* self = static_cast<KafkaProducer*>(opaque);
  const auto tag = reinterpret_cast<std::uintptr_t>(message->_private);
  const auto batch = self->batches_.find(static_cast<std::uint32_t>(tag >> 32));
  if (batch == self->batches_.end()) return;
  const std::size_t index = tag & 0xFFFFFFFFu;
  if (index >= batch->second.outcomes.size()) return;
  DeliveryOutcome& outcome = batch->second.outcomes[index];
  // Only a report without error is proof of delivery; NOT_PERSISTED and
  // POSSIBLY_PERSISTED both leave the event for a retry (its id lets consumers dedupe).
  outcome.delivered = message->err == RD_KAFKA_RESP_ERR_NO_ERROR;
  outcome.error = outcome.delivered ? "" : rd_kafka_err2str(message->err);
  // A broker's MSG_SIZE_TOO_LARGE is not proof that this record can never be produced: it
  // answers for a whole message set (and an injected or transient one looks the same). Only
  // librdkafka's own refusal at producev(), for this record alone, is final; a broker's is
  // retried, and publisher.max_attempts / max_age_ms bound it.
  outcome.permanent = false;
  if (batch->second.pending > 0) --batch->second.pending;
}

void KafkaProducer::on_error(rd_kafka_t* handle, int error, const char* reason, void* opaque) {
  auto* self = static_cast<KafkaProducer*>(opaque);
  if (error != RD_KAFKA_RESP_ERR__FATAL) return;  // transient: librdkafka retries by itself
  char detail[512];
  const rd_kafka_resp_err_t original = rd_kafka_fatal_error(handle, detail, sizeof detail);
  std::lock_guard lock(fatal_mutex);
  self->fatal_reason_ = std::string(rd_kafka_err2name(original)) + ": " + detail + " (" + reason + ")";
  self->fatal_ = true;
}

void KafkaProducer::check_fatal() {
  // The error callback only runs inside rd_kafka_poll(); a producer with nothing in
  // flight would never learn it is dead (producev just keeps answering __FATAL).
  char detail[512];
  const rd_kafka_resp_err_t original = rd_kafka_fatal_error(handle_, detail, sizeof detail);
  if (original == RD_KAFKA_RESP_ERR_NO_ERROR || fatal_) return;
  std::lock_guard lock(fatal_mutex);
  fatal_reason_ = std::string(rd_kafka_err2name(original)) + ": " + detail;
  fatal_ = true;
}

std::string KafkaProducer::fatal_reason() const {
  std::lock_guard lock(fatal_mutex);
  return fatal_reason_;
}

void KafkaProducer::raise_fatal_error(const std::string& reason) {
  rd_kafka_test_fatal_error(handle_, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, reason.c_str());
}

bool KafkaProducer::connected(std::chrono::milliseconds timeout) const {
  const rd_kafka_metadata_t* metadata = nullptr;
  const auto err = rd_kafka_metadata(handle_, 0, nullptr, &metadata, static_cast<int>(timeout.count()));
  if (metadata) rd_kafka_metadata_destroy(metadata);
  return err == RD_KAFKA_RESP_ERR_NO_ERROR;
}

std::uint32_t KafkaProducer::produce(const std::vector<KafkaRecord>& records) {
  check_fatal();
  const std::uint32_t id = ++next_batch_;
  Batch& batch = batches_[id];
  batch.outcomes.resize(records.size());
  for (std::size_t i = 0; i < records.size() && !fatal_; ++i) {
    const KafkaRecord& record = records[i];
    rd_kafka_headers_t* headers = rd_kafka_headers_new(record.headers.size());
    for (const auto& [name, value] : record.headers)
      rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                          static_cast<ssize_t>(value.size()));
    while (true) {
      const rd_kafka_resp_err_t err = rd_kafka_producev(
          handle_, RD_KAFKA_V_TOPIC(record.topic.c_str()),
          RD_KAFKA_V_KEY(const_cast<char*>(record.key.data()), record.key.size()),
          RD_KAFKA_V_VALUE(const_cast<char*>(record.value.data()), record.value.size()),
          RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers),
          RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>((static_cast<std::uintptr_t>(id) << 32) | i)), RD_KAFKA_V_END);
      if (err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        ++batch.pending;  // headers now belong to the message
        break;
      }
      if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        rd_kafka_poll(handle_, 10);  // serve delivery reports to make room
        continue;
      }
      rd_kafka_headers_destroy(headers);
      batch.outcomes[i].error = std::string("not produced: ") + rd_kafka_err2str(err);
      // librdkafka refuses a record over message.max.bytes here, before sending it.
      batch.outcomes[i].permanent = err == RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE;
      if (err == RD_KAFKA_RESP_ERR__FATAL) check_fatal();
      break;
    }
  }
  rd_kafka_poll(handle_, 0);
  return id;
}

bool KafkaProducer::complete(std::uint32_t id) {
  rd_kafka_poll(handle_, 0);
  return batches_.at(id).pending == 0;
}

std::vector<DeliveryOutcome> KafkaProducer::await(std::uint32_t id, std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  const auto pending = [&] { return batches_.at(id).pending; };
  while (pending() > 0 && !fatal_ && std::chrono::steady_clock::now() < deadline) {
    rd_kafka_poll(handle_, 20);
    check_fatal();
  }
  if (pending() > 0) {
    // Out of time or fatal: take everything back, so no late report can confirm a record
    // after its row was handed to a retry.
    rd_kafka_purge(handle_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT | RD_KAFKA_PURGE_F_NON_BLOCKING);
    rd_kafka_poll(handle_, 0);
    for (auto& outcome : batches_.at(id).outcomes)
      if (!outcome.delivered && outcome.error.empty())
        outcome.error = fatal_ ? "producer failed fatally: " + fatal_reason() : "no delivery report in time";
  }
  auto outcomes = std::move(batches_.at(id).outcomes);
  batches_.erase(id);
  return outcomes;
}

}  // namespace boxcar::detail
