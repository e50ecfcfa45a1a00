// The publisher's database operations on outbox_events, one method per statement of
// publisher_queries.hpp, each an autocommit statement prepared once per connection.
// Rows are read by column name.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <pqxx/row>

#include "boxcar/outbox/outbox_status.hpp"
#include "boxcar/core/backoff.hpp"
#include "boxcar/core/connection_pool.hpp"

namespace boxcar::detail {

/// An outbox row as the claim returns it (columns of migrations/0002_outbox.sql).
struct ClaimedEvent {
  std::int64_t id = 0;
  std::string event_id;
  std::string event_type;
  int schema_version = 1;
  std::string topic;
  std::string message_key;
  std::string tenant_scope;
  /// Empty for a global event; the next three empty when the emit gave none.
  std::string tenant_id;
  std::string causation_id;
  std::string correlation_id;
  std::string traceparent;
  /// The emit's custom headers as a JSON object of strings.
  std::string headers_json;
  /// Canonical JSON, published as it is.
  std::string payload;
  int attempts = 0;

  static ClaimedEvent from_row(const pqxx::row& row);
};

/// An event that left PUBLISHING other than by delivery: RETRYABLE or DEAD.
struct SettledEvent {
  OutboxStatus status;
  std::string topic;
};

struct PublishedEvent {
  std::string topic;
  /// From emit (created_at) to the mark: the emit→delivered latency.
  double seconds_since_emit = 0;
};

class EventStore {
 public:
  EventStore(std::shared_ptr<ConnectionPool> pool, const std::string& schema);

  /// Claims up to `limit` due events, oldest first, under `token` for `lease`, taking
  /// events while their records (measured as boxcar/outbox/record_size.hpp does, from
  /// above) total at most `max_bytes`; when `at_least_one`, the first due event is taken
  /// even if larger. Spends one attempt of each.
  std::vector<ClaimedEvent> claim(std::size_t limit, std::size_t max_bytes, bool at_least_one, const std::string& token,
                                  std::chrono::milliseconds lease);
  /// Expired claims (their publisher died or hung) become due again at once, or DEAD when
  /// `max_attempts` (> 0) is used up or they are older than `max_age` (> 0); returns up
  /// to `limit` of them.
  std::vector<SettledEvent> recover_expired(std::size_t limit, int max_attempts, std::chrono::milliseconds max_age);
  /// Marks the events `event_ids` PUBLISHED if still claimed under `token`; returns those
  /// it marked (fewer when a lease expired meanwhile).
  std::vector<PublishedEvent> mark_published(std::span<const std::string> event_ids, const std::string& token);
  /// How record_failure() settles the events it is given.
  struct FailurePolicy {
    BackoffOptions backoff;
    /// > 0: DEAD (ATTEMPTS_EXHAUSTED) once this many attempts were spent.
    int max_attempts = 0;
    /// > 0: DEAD (MAX_AGE_EXCEEDED) once the event is older than this.
    std::chrono::milliseconds max_age{0};
    /// The producer refused the records for good (too large): DEAD (RECORD_TOO_LARGE) now.
    bool permanent = false;
  };
  /// Records a failed delivery of the events `event_ids` still claimed under `token`:
  /// RETRYABLE after a full-jitter backoff, or DEAD as `policy` says.
  std::vector<SettledEvent> record_failure(std::span<const std::string> event_ids, const std::string& token,
                                           const std::string& error, const FailurePolicy& policy);

  /// Marks the events `event_ids` (still claimed under `token`) DEAD with `dead_reason` and
  /// each its own `errors[i]`, without a delivery: they were never produced.
  std::vector<SettledEvent> refuse(std::span<const std::string> event_ids, std::span<const std::string> errors,
                                   const std::string& token, const std::string& dead_reason);

 private:
  std::shared_ptr<ConnectionPool> pool_;
  std::string names_;  // statement name prefix, per schema
  std::string claim_, recover_, mark_published_, mark_failed_, mark_refused_;
};

}  // namespace boxcar::detail
