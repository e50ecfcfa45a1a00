// Claim → produce → await → mark, several batches deep.
#include "batch_pipeline.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/uuid.hpp"
#include "boxcar/outbox/errors.hpp"

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
  std::size_t claimed = start_batch();
  // Nothing claimed with batches in flight: nothing is due, or the next event does not
  // fit the byte budget they leave. Finishing the oldest frees its bytes; claim again, so
  // "nothing claimed and nothing in flight" still means nothing is due (drain() stops on it).
  while (claimed == 0 && !in_flight_.empty()) {
    finish_oldest();
    claimed = start_batch();
  }
  // Batches whose reports are all in are marked at once (latency); beyond that, wait
  // for the oldest only when the pipeline is full.
  while (!in_flight_.empty() && producer_.complete(in_flight_.front().id)) finish_oldest();
  if (in_flight_.size() >= options_.max_in_flight_batches) finish_oldest();
  return claimed;
}

void BatchPipeline::finish_all() {
  while (!in_flight_.empty()) finish_oldest();
}

void BatchPipeline::abandon() {
  in_flight_.clear();
  in_flight_bytes_ = 0;
  set_in_flight_events(0);
}

void BatchPipeline::set_in_flight_events(std::size_t count) {
  in_flight_events_ = count;
  if (options_.metrics) options_.metrics->set_in_flight_events(in_flight_events_);
}

std::size_t BatchPipeline::start_batch() {
  if (!in_flight_.empty() && in_flight_bytes_ >= options_.max_in_flight_bytes) return 0;  // budget used up
  std::string token = uuid_v7();
  const std::size_t budget = options_.max_in_flight_bytes - std::min(in_flight_bytes_, options_.max_in_flight_bytes);
  // Nothing in flight: the oldest event goes out even if it alone exceeds the budget,
  // or an event larger than the budget would never be published.
  auto claimed = store_.claim(options_.batch_size, budget, in_flight_.empty(), token, options_.lease);
  if (claimed.empty()) return 0;
  const std::size_t count = claimed.size();
  counters_.claimed += count;
  // Emit order within the batch, so one key's events reach its partition in order.
  std::sort(claimed.begin(), claimed.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  InFlight batch{.token = std::move(token), .events = {}, .id = 0, .bytes = 0};
  batch.events.reserve(claimed.size());
  std::vector<KafkaRecord> records;
  records.reserve(claimed.size());
  Refusals refused, malformed;
  for (auto& event : claimed) {
    KafkaRecord record;
    try {
      record = mapper_.map(event);
    } catch (const OutboxValidationError& e) {
      // One row the emitter would have refused must not throw its whole batch back, again
      // at every claim: it alone is DEAD, the rest go out.
      malformed.add(event.event_id, std::string(kRecordMalformed) + ": " + e.code() + " " + e.what());
      continue;
    }
    if (!mapper_.allowed(record.topic)) {
      refused.add(event.event_id, "TOPIC_NOT_ALLOWED: topic '" + record.topic +
                                      "' is not in publisher.allowed_topics (event type '" + event.event_type + "')");
      continue;
    }
    records.push_back(std::move(record));
    batch.bytes += record_bytes(records.back());
    batch.events.push_back({event.event_id, records.back().topic});
  }
  claimed.clear();  // the payloads moved into the records; librdkafka copies them next
  if (!malformed.event_ids.empty()) refuse_malformed(malformed, batch.token);
  if (!refused.event_ids.empty()) refuse(refused, batch.token);
  if (records.empty()) return count;  // every event refused: nothing to produce
  batch.id = producer_.produce(records);
  in_flight_bytes_ += batch.bytes;
  if (in_flight_bytes_ > counters_.peak_in_flight_bytes) counters_.peak_in_flight_bytes = in_flight_bytes_;
  const std::size_t batch_events = batch.events.size();
  in_flight_.push_back(std::move(batch));
  set_in_flight_events(in_flight_events_ + batch_events);
  return count;
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
  in_flight_bytes_ -= std::min(in_flight_bytes_, batch.bytes);
  std::vector<std::string> delivered;
  // [0]: may succeed on a retry; [1]: refused for good (too large), DEAD at once.
  std::vector<std::string> failed[2];
  std::string first_error[2];
  std::string first_failed_event[2];
  for (std::size_t i = 0; i < batch.events.size(); ++i) {
    if (outcomes[i].delivered) {
      delivered.push_back(batch.events[i].event_id);
    } else {
      const int kind = outcomes[i].permanent ? 1 : 0;
      failed[kind].push_back(batch.events[i].event_id);
      if (first_error[kind].empty()) {
        first_error[kind] = outcomes[i].error;
        first_failed_event[kind] = batch.events[i].event_id;
      }
    }
  }
  if (!delivered.empty()) {
    BOXCAR_FAILPOINT("publisher.before_mark");
    const auto published = store_.mark_published(delivered, batch.token);
    counters_.delivered += published.size();
    if (options_.metrics)
      for (const auto& event : published) {
        options_.metrics->published(mapper_.topic_label(event.topic), "delivered");
        options_.metrics->emit_to_delivered(mapper_.topic_label(event.topic), event.seconds_since_emit);
      }
    if (published.size() < delivered.size())
      log_->warn("{} delivered events were no longer claimed by this publisher (lease expired)",
                 delivered.size() - published.size());
    if (options_.on_delivered) options_.on_delivered(delivered);
    if (log_->should_log(spdlog::level::debug))
      for (std::size_t i = 0; i < batch.events.size(); ++i)
        if (outcomes[i].delivered)
          log_event(
              *log_, LogLevel::Debug, "event published",
              {{"outcome", "delivered"}, {"event_id", batch.events[i].event_id}, {"topic", batch.events[i].topic}});
  }
  for (const int kind : {0, 1})
    if (!failed[kind].empty())
      record_failures(batch, failed[kind], first_error[kind], first_failed_event[kind], kind == 1);
}

void BatchPipeline::record_failures(const InFlight& batch, const std::vector<std::string>& event_ids,
                                    const std::string& error, const std::string& first_event_id, bool permanent) {
  const EventStore::FailurePolicy policy{.backoff = options_.backoff,
                                         .max_attempts = options_.max_attempts,
                                         .max_age = options_.max_age,
                                         .permanent = permanent};
  for (const auto& event : store_.record_failure(event_ids, batch.token, error, policy)) {
    const bool dead = event.status == OutboxStatus::Dead;
    ++(dead ? counters_.dead : counters_.failed);
    if (options_.metrics) options_.metrics->published(mapper_.topic_label(event.topic), dead ? "dead" : "failed");
  }
  log_event(*log_, permanent ? LogLevel::Error : LogLevel::Warn,
            permanent ? "events refused by the producer for good (too large), now DEAD"
                      : "events not delivered, retrying with backoff",
            {{"outcome", permanent ? "dead" : "failed"},
             {"count", std::to_string(event_ids.size())},
             {"batch", std::to_string(batch.events.size())},
             {"first_event_id", first_event_id},
             {"error", error}});
}

void BatchPipeline::refuse(const Refusals& refusals, const std::string& token) {
  // The row's topic may be allowed and its override not: the label says why instead.
  const auto refused = store_.refuse(refusals.event_ids, refusals.errors, token, "TOPIC_NOT_ALLOWED");
  counters_.dead += refused.size();
  if (options_.metrics && !refused.empty()) options_.metrics->published("(not allowed)", "dead", refused.size());
  log_event(*log_, LogLevel::Error, "events for topics outside publisher.allowed_topics, now DEAD and never produced",
            {{"outcome", "dead"},
             {"dead_reason", "TOPIC_NOT_ALLOWED"},
             {"count", std::to_string(refusals.event_ids.size())},
             {"error", refusals.errors.front()}});
}

void BatchPipeline::refuse_malformed(const Refusals& refusals, const std::string& token) {
  const auto refused = store_.refuse(refusals.event_ids, refusals.errors, token, std::string(kRecordMalformed));
  counters_.dead += refused.size();
  if (options_.metrics)
    for (const auto& event : refused) options_.metrics->published(mapper_.topic_label(event.topic), "dead");
  log_event(*log_, LogLevel::Error,
            "events whose stored row is not a record the emitter writes, now DEAD and never produced",
            {{"outcome", "dead"},
             {"dead_reason", std::string(kRecordMalformed)},
             {"count", std::to_string(refusals.event_ids.size())},
             {"first_event_id", refusals.event_ids.front()},
             {"error", refusals.errors.front()}});
}

}  // namespace boxcar::detail
