// Claim → produce → await → mark, several batches deep.
#include "batch_pipeline.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/uuid.hpp"

namespace boxcar::detail {

BatchPipeline::BatchPipeline(EventStore& store, const RecordMapper& mapper, ProducerSlot& producer,
                             const PublisherOptions& options, PublisherCounters& counters,
                             std::shared_ptr<spdlog::logger> log)
    : store_(store),
      mapper_(mapper),
      producer_(producer),
      options_(options),
      counters_(counters),
      log_(std::move(log)) {}

std::size_t BatchPipeline::step() {
  const std::size_t claimed = start_batch();
  // Batches whose reports are all in are marked at once (latency); beyond that, wait
  // for the oldest only when the pipeline is full or there is nothing else to do.
  while (!in_flight_.empty() && producer_.complete(in_flight_.front().id)) finish_oldest();
  if (in_flight_.size() >= options_.max_in_flight_batches || (claimed == 0 && !in_flight_.empty())) finish_oldest();
  return claimed;
}

void BatchPipeline::finish_all() {
  while (!in_flight_.empty()) finish_oldest();
}

void BatchPipeline::abandon() {
  in_flight_.clear();
  set_in_flight_events(0);
}

void BatchPipeline::set_in_flight_events(std::size_t count) {
  in_flight_events_ = count;
  if (options_.metrics) options_.metrics->set_in_flight_events(in_flight_events_);
}

std::size_t BatchPipeline::start_batch() {
  std::string token = uuid_v7();
  auto claimed = store_.claim(options_.batch_size, token, options_.lease);
  if (claimed.empty()) return 0;
  counters_.claimed += claimed.size();
  // Emit order within the batch, so one key's events reach its partition in order.
  std::sort(claimed.begin(), claimed.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  InFlight batch{.token = std::move(token), .events = {}, .id = 0};
  batch.events.reserve(claimed.size());
  std::vector<KafkaRecord> records;
  records.reserve(claimed.size());
  for (const auto& event : claimed) {
    records.push_back(mapper_.map(event));
    batch.events.push_back({event.id, event.event_id, records.back().topic});
  }
  batch.id = producer_.produce(records);
  in_flight_.push_back(std::move(batch));
  set_in_flight_events(in_flight_events_ + claimed.size());
  return claimed.size();
}

void BatchPipeline::finish_oldest() {
  InFlight batch = std::move(in_flight_.front());
  in_flight_.pop_front();
  // Wait a little past message.timeout.ms: librdkafka fails every record by then, so the
  // batch ends with a report (or a purge) for each. A fatal producer fails every batch in
  // flight; it is replaced once all are accounted for (this is the last one).
  auto awaited = producer_.await(batch.id, options_.delivery_timeout + std::chrono::seconds(2),
                                 /*replace_if_fatal=*/in_flight_.empty());
  if (awaited.replaced_after) {
    ++counters_.fatal_errors;
    log_->error("Kafka producer failed fatally ({}); recreating it, undelivered events stay unpublished",
                *awaited.replaced_after);
    ++counters_.producer_restarts;
  }
  const bool fatal_pending = !in_flight_.empty() && producer_.fatal();
  mark(batch, awaited.outcomes);
  if (fatal_pending) finish_all();
}

void BatchPipeline::mark(const InFlight& batch, const std::vector<DeliveryOutcome>& outcomes) {
  set_in_flight_events(in_flight_events_ - batch.events.size());
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
    BOXCAR_FAILPOINT("publisher.before_mark");
    const auto published = store_.mark_published(delivered, batch.token);
    counters_.delivered += published.size();
    if (options_.metrics)
      for (const auto& event : published) {
        options_.metrics->published(event.topic, "delivered");
        options_.metrics->emit_to_delivered(event.topic, event.seconds_since_emit);
      }
    if (published.size() < delivered.size())
      log_->warn("{} delivered events were no longer claimed by this publisher (lease expired)",
                 delivered.size() - published.size());
    if (options_.on_delivered) options_.on_delivered(delivered_event_ids);
    if (log_->should_log(spdlog::level::debug))
      for (std::size_t i = 0; i < batch.events.size(); ++i)
        if (outcomes[i].delivered)
          log_event(
              *log_, LogLevel::Debug, "event published",
              {{"outcome", "delivered"}, {"event_id", batch.events[i].event_id}, {"topic", batch.events[i].topic}});
  }
  if (!failed.empty()) {
    for (const auto& event :
         store_.record_failure(failed, batch.token, first_error, options_.backoff, options_.max_attempts)) {
      const bool dead = event.status == OutboxStatus::Dead;
      ++(dead ? counters_.dead : counters_.failed);
      if (options_.metrics) options_.metrics->published(event.topic, dead ? "dead" : "failed");
    }
    log_event(*log_, LogLevel::Warn, "events not delivered, retrying with backoff",
              {{"outcome", "failed"},
               {"count", std::to_string(failed.size())},
               {"batch", std::to_string(batch.events.size())},
               {"first_event_id", first_failed_event},
               {"error", first_error}});
  }
}

}  // namespace boxcar::detail
