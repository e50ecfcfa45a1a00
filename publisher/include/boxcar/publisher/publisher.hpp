// boxcar::Publisher — delivers committed outbox events to Kafka at least once.
//
// It claims batches of due events (FOR NO KEY UPDATE SKIP LOCKED, one claim token and a
// lease per batch), produces them with an idempotent librdkafka producer
// (enable.idempotence=true, acks=all), waits for their delivery reports, and marks the
// delivered ones PUBLISHED in one statement guarded by the claim token. An event is
// never marked before a delivery report without error; everything else is retried with
// backoff. Each record carries the event's stable id (header `event_id`), so consumers
// deduplicate redeliveries. Several publishers, in any number of processes, may run
// against one database.
//
// Per-key order holds across retries for the events emitted with an explicit
// EmitOptions::key and `ordered` (the default): the first copies of the events of one
// ordering key reach Kafka in the commit order of their emitting transactions, whatever
// fails in between (a failed delivery, an expired claim, a killed publisher) and however
// many publishers run, because the key-order triggers of migration 0013 make only a key's
// head claimable. It does not hold for events keyed only by their tenant (no explicit key)
// or emitted with `ordered = false`: a retried one may land after later events of its
// record key. docs/publisher.md, "Ordering", says which events share an ordering key.
//
// Thread-safety: start(), stop(), stats() from any thread; drain() on one thread while
// not started.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/heartbeat.hpp"
#include "boxcar/core/metrics.hpp"

namespace boxcar {

struct PublisherOptions {
  /// Schema holding outbox_events.
  std::string schema = "boxcar";
  /// librdkafka properties passed through as they are (bootstrap.servers,
  /// security.protocol, sasl.*, ssl.*, linger.ms, ...). enable.idempotence=true and
  /// acks=all are always set; setting them otherwise is a ConfigError. message.max.bytes
  /// defaults to kDefaultMaxRecordBytes (boxcar/outbox/record_size.hpp), the emitter's
  /// limit; set one, set the other (OutboxOptions::max_record_bytes) to the same value.
  std::map<std::string, std::string> kafka{};
  /// event type -> topic, overriding the topic an event was emitted with.
  std::map<std::string, std::string> topic_overrides{};
  /// publisher.allowed_topics: when not empty, the only topics events may go to (after
  /// topic_overrides). An event whose topic is outside it is never produced: it becomes
  /// DEAD at once (dead_reason TOPIC_NOT_ALLOWED), while the rest of its batch is
  /// delivered. Empty (the default): every topic (docs/security.md, section 3).
  std::set<std::string> allowed_topics{};
  /// Events claimed and produced per batch.
  std::size_t batch_size = 1000;
  /// Batches with the producer at once: the next batches are claimed and produced while
  /// earlier ones wait for their delivery reports (docs/benchmarks.md, "The publisher's
  /// pipeline").
  std::size_t max_in_flight_batches = 4;
  /// Most record bytes (payload, key, headers: boxcar/outbox/record_size.hpp) claimed and
  /// with the producer at once, over all batches in flight: a claim takes fewer events
  /// than batch_size when they would exceed it, and none while the batches in flight
  /// already use it up. One event is always taken when nothing is in flight, so an event
  /// larger than the budget still goes out (alone). Bounds the publisher's memory, which
  /// is otherwise batch_size × message.max.bytes × max_in_flight_batches.
  std::size_t max_in_flight_bytes = 64 * 1024 * 1024;
  /// How long a batch's claim is owned; must exceed delivery_timeout by at least 5 s.
  std::chrono::milliseconds lease{std::chrono::seconds(90)};
  /// librdkafka's message.timeout.ms: after it, an undelivered event fails and retries.
  std::chrono::milliseconds delivery_timeout{std::chrono::seconds(30)};
  /// Failed deliveries before an event becomes DEAD; 0 retries without limit.
  int max_attempts = 0;
  /// An event still undelivered this long after its emit becomes DEAD (MAX_AGE_EXCEEDED)
  /// at its next failed delivery or expired claim, so an event that can never be
  /// delivered ends within a bounded time; 0 retries without limit. A record the producer
  /// refuses as too large (MSG_SIZE_TOO_LARGE) is DEAD at once (RECORD_TOO_LARGE).
  std::chrono::milliseconds max_age{std::chrono::hours(24 * 7)};
  BackoffOptions backoff{.base = std::chrono::milliseconds(500), .cap = std::chrono::minutes(1)};
  /// Fallback polling when no NOTIFY arrives (and lease recovery cadence).
  std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};
  /// Observer for metrics and tests: called on the publishing thread right after a batch's
  /// delivered events were marked PUBLISHED, with their event ids. Keep it cheap.
  std::function<void(const std::vector<std::string>& event_ids)> on_delivered{};
  /// Where publish outcomes and emit→delivered latency are recorded; null: nowhere.
  std::shared_ptr<Metrics> metrics{};
};

struct PublisherStats {
  std::uint64_t claimed = 0;
  std::uint64_t delivered = 0;
  std::uint64_t failed = 0;
  std::uint64_t dead = 0;
  std::uint64_t fatal_errors = 0;
  std::uint64_t producer_restarts = 0;
  std::uint64_t lease_expired = 0;
  /// The most record bytes ever in flight at once (PublisherOptions::max_in_flight_bytes).
  std::uint64_t peak_in_flight_bytes = 0;
};

class Publisher {
 public:
  /// @throws ConfigError naming the key for bad options (kafka.<property> for a property
  ///   librdkafka rejects). Creates the producer; does not touch the database.
  Publisher(std::shared_ptr<ConnectionPool> pool, PublisherOptions options);
  ~Publisher();  // stop()
  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  /// Starts the publishing thread (no-op when running).
  void start();
  /// Stops claiming, finishes the batch in flight (its delivery reports or timeout) and
  /// joins. Idempotent.
  void stop();
  /// Publishes due events on the calling thread until none is due; returns how many it
  /// claimed. Must not run while start()ed.
  std::size_t drain();

  PublisherStats stats() const;
  /// True when the producer has a connection to at least one broker (readiness). Asks a
  /// broker for metadata: blocks up to 2 s, but never waits for a batch in flight.
  bool kafka_connected() const;
  /// Beats once per iteration of the publishing thread's loop (liveness). An iteration
  /// lasts at most about delivery_timeout + 2 s (a batch's delivery reports) plus the
  /// database statements of a claim and a mark, or poll_interval when idle.
  const Heartbeat& heartbeat() const noexcept;

  /// Fault drill: raises an idempotent-producer fatal error (rd_kafka_test_fatal_error)
  /// on the current producer, which the publisher must survive by recreating it.
  void raise_fatal_error_for_testing(const std::string& reason);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxcar
