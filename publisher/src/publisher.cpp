// The publishing thread: its lifecycle, lease recovery on the poll cadence, and the loop
// that steps the pipeline and sleeps on LISTEN/NOTIFY or the poll interval when idle.
// The parts: option checks (publisher_options_check), statements (event_store), row →
// record (record_mapper), claim/produce/mark several batches deep (batch_pipeline),
// producer replacement (producer_slot).
#include "boxcar/publisher/publisher.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "batch_pipeline.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/detail/wakeup_listener.hpp"
#include "event_store.hpp"
#include "producer_slot.hpp"
#include "publisher_counters.hpp"
#include "publisher_options_check.hpp"
#include "record_mapper.hpp"

namespace boxcar {

using Clock = std::chrono::steady_clock;

class Publisher::Impl {
 public:
  Impl(std::shared_ptr<ConnectionPool> pool, PublisherOptions options)
      : pool_(std::move(pool)),
        options_(std::move(options)),
        schema_(detail::check_publisher_options(pool_.get(), options_)),
        log_(logger("publisher")),
        store_(pool_, schema_),
        mapper_(options_.topic_overrides, options_.allowed_topics),
        producer_(options_.kafka, options_.delivery_timeout),
        pipeline_(store_, mapper_, producer_, options_, counters_, log_) {}

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
      const std::size_t claimed = pipeline_.step();
      total += claimed;
      if (claimed == 0 && pipeline_.empty()) return total;
    }
  }

  PublisherStats stats() const { return counters_.snapshot(); }

  bool kafka_connected() {
    // The metadata request may take seconds: ask outside the lock, so a readiness check
    // never stalls the publishing thread; the copy keeps a producer replaced meanwhile
    // alive. current() does not wait for an await in progress (producer_slot.hpp).
    const auto producer = producer_.current();
    return producer && !producer->fatal() && producer->connected(std::chrono::milliseconds(2000));
  }

  void raise_fatal_error(const std::string& reason) { producer_.raise_fatal_error(reason); }

  const Heartbeat& heartbeat() const noexcept { return heartbeat_; }

 private:
  // The publisher's rescuer: claims whose publisher died or hung become due again (or DEAD).
  void recover_expired() {
    const auto recovered = store_.recover_expired(options_.batch_size, options_.max_attempts, options_.max_age);
    for (const auto& event : recovered) {
      ++counters_.lease_expired;
      if (event.status != OutboxStatus::Dead) continue;
      ++counters_.dead;
      if (options_.metrics) options_.metrics->published(mapper_.topic_label(event.topic), "dead");
    }
    if (!recovered.empty()) log_->warn("recovered {} events whose publisher lost its claim", recovered.size());
  }

  void loop() {
    detail::WakeupListener wakeups(pool_->session_connection_string(), OutboxEmitter::notify_channel(options_.schema),
                                   log_);
    auto next_recovery = Clock::now();
    while (!stopping_) {
      heartbeat_.beat();
      wakeups.ensure_listening();
      std::size_t claimed = 0;
      try {
        if (Clock::now() >= next_recovery) {
          next_recovery = Clock::now() + options_.poll_interval;
          recover_expired();
        }
        claimed = pipeline_.step();
      } catch (const std::exception& e) {
        log_->error("publishing failed, retrying after {} ms: {}", options_.poll_interval.count(), e.what());
        sleep_for(options_.poll_interval);
        continue;
      }
      if (claimed > 0 || !pipeline_.empty()) continue;
      wakeups.wait_until(std::min(next_recovery, Clock::now() + options_.poll_interval),
                         [&] { return stopping_.load(); });
    }
    try {
      pipeline_.finish_all();  // the batches in flight end with their reports (or time out)
    } catch (const std::exception& e) {
      pipeline_.abandon();
      log_->error("could not finish the batches in flight; their leases will expire: {}", e.what());
    }
  }

  void sleep_for(std::chrono::milliseconds duration) {
    const auto end = Clock::now() + duration;
    while (!stopping_ && Clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // Declaration order is construction order: the options are checked before anything
  // else is built from them.
  std::shared_ptr<ConnectionPool> pool_;
  PublisherOptions options_;
  std::string schema_;
  std::shared_ptr<spdlog::logger> log_;
  detail::EventStore store_;
  detail::RecordMapper mapper_;
  detail::ProducerSlot producer_;
  detail::PublisherCounters counters_;
  detail::BatchPipeline pipeline_;  // the publishing thread's only
  std::mutex lifecycle_;
  bool running_ = false;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  Heartbeat heartbeat_;
};

Publisher::Publisher(std::shared_ptr<ConnectionPool> pool, PublisherOptions options)
    : impl_(std::make_unique<Impl>(std::move(pool), std::move(options))) {}
Publisher::~Publisher() = default;
void Publisher::start() { impl_->start(); }
void Publisher::stop() { impl_->stop(); }
std::size_t Publisher::drain() { return impl_->drain(); }
PublisherStats Publisher::stats() const { return impl_->stats(); }
bool Publisher::kafka_connected() const { return impl_->kafka_connected(); }
const Heartbeat& Publisher::heartbeat() const noexcept { return impl_->heartbeat(); }
void Publisher::raise_fatal_error_for_testing(const std::string& reason) { impl_->raise_fatal_error(reason); }

}  // namespace boxcar
