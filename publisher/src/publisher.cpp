// The publishing loop: recover expired leases, claim a batch, produce it, mark what the
// delivery reports confirmed; sleep on LISTEN/NOTIFY or the poll interval when idle.
#include "boxcar/publisher/publisher.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/runtime/logging.hpp"
#include "boxcar/runtime/sql_identifier.hpp"
#include "boxcar/runtime/uuid.hpp"
#include "boxcar/runtime/wakeup_listener.hpp"
#include "kafka_producer.hpp"
#include "publisher_queries.hpp"

namespace boxcar {
namespace {

using Clock = std::chrono::steady_clock;

struct ClaimedEvent {
  std::int64_t id;
  std::string event_id;
  detail::KafkaRecord record;
};

// A claimed batch whose records are with the producer.
struct InFlight {
  std::string token;
  std::vector<ClaimedEvent> events;
  std::uint32_t id;
};

std::string id_array(const std::vector<std::int64_t>& ids) {
  std::string out = "{";
  for (const auto id : ids) {
    if (out.size() > 1) out += ',';
    out += std::to_string(id);
  }
  return out + "}";
}

}  // namespace

using detail::DeliveryOutcome;
using detail::KafkaProducer;
using detail::KafkaRecord;

class Publisher::Impl {
 public:
  Impl(std::shared_ptr<ConnectionPool> pool, PublisherOptions options)
      : pool_(pool ? std::move(pool) : throw ConfigError("publisher.pool", "a connection pool is required")),
        options_(std::move(options)),
        log_(logger("publisher")) {
    const std::string schema = validate_schema_name(options_.schema, "schema");
    if (options_.batch_size == 0) throw ConfigError("publisher.batch_size", "must be at least 1");
    if (options_.max_in_flight_batches == 0)
      throw ConfigError("publisher.max_in_flight_batches", "must be at least 1");
    if (options_.max_attempts < 0) throw ConfigError("publisher.max_attempts", "must be 0 (no limit) or more");
    if (options_.delivery_timeout < std::chrono::seconds(1))
      throw ConfigError("publisher.delivery_timeout_ms", "must be at least 1 s");
    if (options_.lease < options_.delivery_timeout + std::chrono::seconds(5))
      throw ConfigError("publisher.lease_ms", "must exceed publisher.delivery_timeout_ms by at least 5 s, so a claim "
                                              "cannot expire while its delivery reports may still arrive");
    for (const auto& [type, topic] : options_.topic_overrides)
      if (type.empty() || topic.empty())
        throw ConfigError("publisher.topics", "a topic override needs an event type and a topic");
    claim_ = with_schema(publisher_sql::kClaim, schema);
    recover_ = with_schema(publisher_sql::kRecoverExpired, schema);
    mark_published_ = with_schema(publisher_sql::kMarkPublished, schema);
    mark_failed_ = with_schema(publisher_sql::kMarkFailed, schema);
    names_ = "boxcar.publisher." + schema + ".";
    producer_ = std::make_shared<KafkaProducer>(options_.kafka, options_.delivery_timeout);
  }

  ~Impl() { stop(); }

  void start() {
    std::lock_guard lock(lifecycle_);
    if (running_) return;
    running_ = true;
    stopping_ = false;
    thread_ = std::thread([this] { loop(); });
    log_->info("publisher started: batch size {}, delivery timeout {} ms", options_.batch_size,
               options_.delivery_timeout.count());
  }

  void stop() {
    std::lock_guard lock(lifecycle_);
    if (!running_) return;
    stopping_ = true;
    thread_.join();
    running_ = false;
    log_->info("publisher stopped");
  }

  std::size_t drain() {
    std::size_t total = 0;
    recover_expired();
    while (true) {
      const std::size_t claimed = step();
      total += claimed;
      if (claimed == 0 && in_flight_.empty()) return total;
    }
  }

  PublisherStats stats() const {
    return {claimed_.load(), delivered_.load(), failed_.load(), dead_.load(),
            fatal_errors_.load(), producer_restarts_.load(), lease_expired_.load()};
  }

  bool kafka_connected() {
    // The metadata request may take seconds: ask outside the lock, so a readiness probe
    // never stalls the publishing thread; the copy keeps a producer replaced meanwhile alive.
    std::shared_ptr<KafkaProducer> producer;
    {
      std::lock_guard lock(producer_mutex_);
      producer = producer_;
    }
    return producer && !producer->fatal() && producer->connected(std::chrono::milliseconds(2000));
  }

  void raise_fatal_error(const std::string& reason) {
    std::lock_guard lock(producer_mutex_);
    producer_->raise_fatal_error(reason);
  }

 private:
  void recover_expired() {
    const auto rows = pool_->autocommit(names_ + "recover", recover_, static_cast<long long>(options_.batch_size),
                                 options_.max_attempts);
    for (const auto& row : rows) {
      ++lease_expired_;
      if (row["status"].as<std::string>() != "DEAD") continue;
      ++dead_;
      if (options_.metrics) options_.metrics->published(row["topic"].as<std::string>(), "dead");
    }
    if (!rows.empty()) log_->warn("recovered {} events whose publisher lost its claim", rows.size());
  }

  // One pipeline step: claim the next batch and start producing it, then finish (mark)
  // batches in emit order: the ones whose delivery reports are in, and the oldest when
  // max_in_flight_batches are with the producer or nothing more is due. So the database
  // work of one batch overlaps the Kafka round trips of the others. Returns how many
  // events it claimed.
  std::size_t step() {
    const std::size_t claimed = start_batch();
    // Batches whose reports are all in are marked at once (latency); beyond that, wait
    // for the oldest only when the pipeline is full or there is nothing else to do.
    while (!in_flight_.empty() && oldest_complete()) finish_oldest();
    if (in_flight_.size() >= options_.max_in_flight_batches || (claimed == 0 && !in_flight_.empty()))
      finish_oldest();
    return claimed;
  }

  bool oldest_complete() {
    std::lock_guard lock(producer_mutex_);
    return producer_->complete(in_flight_.front().id);
  }

  void finish_all() {
    while (!in_flight_.empty()) finish_oldest();
  }

  std::size_t start_batch() {
    std::string token = uuid_v7();
    const auto rows = pool_->autocommit(names_ + "claim", claim_, static_cast<long long>(options_.batch_size), token,
                                 static_cast<long long>(options_.lease.count()));
    if (rows.empty()) return 0;
    claimed_ += rows.size();
    InFlight batch{.token = std::move(token), .events = {}, .id = 0};
    batch.events.reserve(rows.size());
    for (const auto& row : rows) batch.events.push_back(to_event(row));
    // Emit order within the batch, so one key's events reach its partition in order.
    std::sort(batch.events.begin(), batch.events.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
    std::vector<KafkaRecord> records;
    records.reserve(batch.events.size());
    for (const auto& e : batch.events) records.push_back(e.record);
    {
      std::lock_guard lock(producer_mutex_);
      batch.id = producer_->produce(records);
    }
    in_flight_.push_back(std::move(batch));
    in_flight_events_ += rows.size();
    if (options_.metrics) options_.metrics->set_in_flight_events(in_flight_events_);
    return rows.size();
  }

  void finish_oldest() {
    InFlight batch = std::move(in_flight_.front());
    in_flight_.pop_front();
    std::vector<DeliveryOutcome> outcomes;
    {
      std::lock_guard lock(producer_mutex_);
      // Wait a little past message.timeout.ms: librdkafka fails every record by then, so
      // the batch ends with a report (or a purge) for each.
      outcomes = producer_->await(batch.id, options_.delivery_timeout + std::chrono::seconds(2));
      if (producer_->fatal() && in_flight_.empty()) {
        ++fatal_errors_;
        log_->error("Kafka producer failed fatally ({}); recreating it, undelivered events stay unpublished",
                    producer_->fatal_reason());
        producer_.reset();
        producer_ = std::make_shared<KafkaProducer>(options_.kafka, options_.delivery_timeout);
        ++producer_restarts_;
      }
    }
    // A fatal producer fails every batch in flight; replace it once all are accounted for.
    const bool fatal_pending = !in_flight_.empty() && [&] {
      std::lock_guard lock(producer_mutex_);
      return producer_->fatal();
    }();
    mark(batch, outcomes);
    if (fatal_pending) finish_all();
  }

  void mark(const InFlight& batch, const std::vector<DeliveryOutcome>& outcomes) {
    in_flight_events_ -= batch.events.size();
    if (options_.metrics) options_.metrics->set_in_flight_events(in_flight_events_);
    std::vector<std::int64_t> delivered;
    std::vector<std::string> delivered_event_ids;
    std::vector<std::int64_t> failed;
    std::string first_error;
    std::string first_failed_event;
    for (std::size_t i = 0; i < batch.events.size(); ++i) {
      if (outcomes[i].delivered) {
        delivered.push_back(batch.events[i].id);
        if (options_.on_delivered) delivered_event_ids.push_back(batch.events[i].event_id);
      } else {
        failed.push_back(batch.events[i].id);
        if (first_error.empty()) {
          first_error = outcomes[i].error;
          first_failed_event = batch.events[i].event_id;
        }
      }
    }
    if (!delivered.empty()) {
      const auto rows = pool_->autocommit(names_ + "published", mark_published_, id_array(delivered), batch.token);
      const auto marked = rows.size();
      delivered_ += marked;
      if (options_.metrics)
        for (const auto& row : rows) {
          const std::string topic = row[0].as<std::string>();
          options_.metrics->published(topic, "delivered");
          options_.metrics->emit_to_delivered(topic, row[1].as<double>());
        }
      if (marked < delivered.size())
        log_->warn("{} delivered events were no longer claimed by this publisher (lease expired)",
                   delivered.size() - marked);
      if (options_.on_delivered) options_.on_delivered(delivered_event_ids);
      if (log_->should_log(spdlog::level::debug))
        for (std::size_t i = 0; i < batch.events.size(); ++i)
          if (outcomes[i].delivered)
            log_event(*log_, LogLevel::Debug, "event published",
                      {{"outcome", "delivered"}, {"event_id", batch.events[i].event_id},
                       {"topic", batch.events[i].record.topic}});
    }
    if (!failed.empty()) {
      const auto statuses =
          pool_->autocommit(names_ + "failed", mark_failed_, id_array(failed), batch.token, first_error,
                     static_cast<long long>(options_.backoff.base.count()),
                     static_cast<long long>(options_.backoff.cap.count()), options_.max_attempts);
      for (const auto& row : statuses) {
        const bool dead = row[0].as<std::string>() == "DEAD";
        (dead ? dead_ : failed_)++;
        if (options_.metrics) options_.metrics->published(row[1].as<std::string>(), dead ? "dead" : "failed");
      }
      log_event(*log_, LogLevel::Warn, "events not delivered, retrying with backoff",
                {{"outcome", "failed"}, {"count", std::to_string(failed.size())},
                 {"batch", std::to_string(batch.events.size())}, {"first_event_id", first_failed_event},
                 {"error", first_error}});
    }
  }

  ClaimedEvent to_event(const pqxx::row& row) const {
    ClaimedEvent e;
    e.id = row[0].as<std::int64_t>();
    e.event_id = row[1].as<std::string>();
    const std::string& event_id = e.event_id;
    const std::string event_type = row[2].as<std::string>();
    const auto override = options_.topic_overrides.find(event_type);
    e.record.topic = override != options_.topic_overrides.end() ? override->second : row[4].as<std::string>();
    e.record.key = row[5].as<std::string>();
    e.record.value = row[12].as<std::string>();
    auto& h = e.record.headers;
    const auto custom_headers = nlohmann::json::parse(row[11].c_str());
    for (const auto& [name, value] : custom_headers.items()) h.emplace_back(name, value.get<std::string>());
    h.emplace_back("event_id", event_id);
    h.emplace_back("event_type", event_type);
    h.emplace_back("schema_version", row[3].as<std::string>());
    h.emplace_back("tenant_scope", row[6].as<std::string>());
    const auto optional = [&](const char* name, int column) {
      const std::string value = row[column].as<std::string>();
      if (!value.empty()) h.emplace_back(name, value);
    };
    optional("tenant_id", 7);
    optional("causation_id", 8);
    optional("correlation_id", 9);
    optional("traceparent", 10);
    return e;
  }

  void loop() {
    WakeupListener wakeups(pool_->connection_string(), OutboxEmitter::notify_channel(options_.schema), log_);
    auto next_recovery = Clock::now();
    while (!stopping_) {
      wakeups.ensure_listening();
      std::size_t claimed = 0;
      try {
        if (Clock::now() >= next_recovery) {
          next_recovery = Clock::now() + options_.poll_interval;
          recover_expired();
        }
        claimed = step();
      } catch (const std::exception& e) {
        log_->error("publishing failed, retrying after {} ms: {}", options_.poll_interval.count(), e.what());
        sleep_for(options_.poll_interval);
        continue;
      }
      if (claimed > 0 || !in_flight_.empty()) continue;
      wakeups.wait_until(std::min(next_recovery, Clock::now() + options_.poll_interval),
                         [&] { return stopping_.load(); });
    }
    try {
      finish_all();  // the batches in flight end with their reports (or time out)
    } catch (const std::exception& e) {
      in_flight_.clear();
      in_flight_events_ = 0;
      log_->error("could not finish the batches in flight; their leases will expire: {}", e.what());
    }
  }

  void sleep_for(std::chrono::milliseconds duration) {
    const auto end = Clock::now() + duration;
    while (!stopping_ && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  std::shared_ptr<ConnectionPool> pool_;
  PublisherOptions options_;
  std::shared_ptr<spdlog::logger> log_;
  std::string claim_, recover_, mark_published_, mark_failed_, names_;
  std::mutex producer_mutex_;
  std::shared_ptr<KafkaProducer> producer_;
  std::deque<InFlight> in_flight_;  // the publishing thread's only
  std::size_t in_flight_events_ = 0;
  std::atomic<std::uint64_t> claimed_{0}, delivered_{0}, failed_{0}, dead_{0}, fatal_errors_{0},
      producer_restarts_{0}, lease_expired_{0};
  std::mutex lifecycle_;
  bool running_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

Publisher::Publisher(std::shared_ptr<ConnectionPool> pool, PublisherOptions options)
    : impl_(std::make_unique<Impl>(std::move(pool), std::move(options))) {}
Publisher::~Publisher() = default;
void Publisher::start() { impl_->start(); }
void Publisher::stop() { impl_->stop(); }
std::size_t Publisher::drain() { return impl_->drain(); }
PublisherStats Publisher::stats() const { return impl_->stats(); }
bool Publisher::kafka_connected() const { return impl_->kafka_connected(); }
void Publisher::raise_fatal_error_for_testing(const std::string& reason) { impl_->raise_fatal_error(reason); }

}  // namespace boxcar
