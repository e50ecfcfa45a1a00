// Statement execution for the publisher (SQL text lives in publisher_queries.hpp).
#include "event_store.hpp"

#include <algorithm>

#include <pqxx/pqxx>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/pg_array.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "publisher_queries.hpp"

namespace boxcar::detail {
namespace {

// The statements that settle events (published, failed, DEAD) also move their keys' order
// (migrations/0013_outbox_key_order.sql): each takes the key rows of its events, one by
// one. An emitting transaction that holds several keys may hold one of them and wait for
// another this statement took first; PostgreSQL then aborts one of the two (40P01). When
// it is this statement, nothing of it happened, and it is guarded by the claim token and
// status, so it runs again rather than leaving the batch to its lease (which would hold
// its keys until the lease expires and produce the batch twice).
constexpr int kDeadlockRetries = 5;

template <typename Statement>
pqxx::result retry_deadlocks(const Statement& statement) {
  for (int attempt = 1;; ++attempt) {
    try {
      return statement();
    } catch (const pqxx::transaction_rollback& e) {
      if (attempt >= kDeadlockRetries || sqlstate_of(e) != "40P01") throw;
    }
  }
}

// A batch's event ids as the marks take them: one uuid[] literal, and the smallest and
// largest id for the range predicates (publisher_queries.hpp). Built once per mark, not per
// deadlock retry. The ids are PostgreSQL's text form of uuids (the claim returns
// event_id::text): lowercase hex digits with hyphens at fixed places, whose string order
// is the uuids' byte order. `event_ids` must not be empty.
struct MarkedIds {
  std::string array, first, last;
};

MarkedIds marked_ids(std::span<const std::string> event_ids) {
  const auto [first, last] = std::minmax_element(event_ids.begin(), event_ids.end());
  return {pg_array(event_ids), *first, *last};
}

std::vector<SettledEvent> read_settled(const pqxx::result& rows) {
  std::vector<SettledEvent> settled;
  settled.reserve(rows.size());
  for (const auto& row : rows)
    settled.push_back({parse_outbox_status(row["status"].c_str()), row["topic"].as<std::string>()});
  return settled;
}

}  // namespace

ClaimedEvent ClaimedEvent::from_row(const pqxx::row& row) {
  return {.id = row["id"].as<std::int64_t>(),
          .event_id = row["event_id"].as<std::string>(),
          .event_type = row["event_type"].as<std::string>(),
          .schema_version = row["schema_version"].as<int>(),
          .topic = row["topic"].as<std::string>(),
          .message_key = row["message_key"].as<std::string>(),
          .tenant_scope = row["tenant_scope"].as<std::string>(),
          .tenant_id = row["tenant_id"].as<std::string>(),
          .causation_id = row["causation_id"].as<std::string>(),
          .correlation_id = row["correlation_id"].as<std::string>(),
          .traceparent = row["traceparent"].as<std::string>(),
          .headers_json = row["headers"].as<std::string>(),
          .payload = row["payload"].as<std::string>(),
          .attempts = row["attempts"].as<int>()};
}

EventStore::EventStore(std::shared_ptr<ConnectionPool> pool, const std::string& schema)
    : pool_(std::move(pool)), names_("boxcar.publisher." + schema + ".") {
  claim_ = detail::with_schema(publisher_sql::kClaim, schema);
  recover_ = detail::with_schema(publisher_sql::kRecoverExpired, schema);
  mark_published_ = detail::with_schema(publisher_sql::kMarkPublished, schema);
  mark_failed_ = detail::with_schema(publisher_sql::kMarkFailed, schema);
  mark_refused_ = detail::with_schema(publisher_sql::kMarkRefused, schema);
}

std::vector<ClaimedEvent> EventStore::claim(std::size_t limit, std::size_t max_bytes, bool at_least_one,
                                            const std::string& token, std::chrono::milliseconds lease) {
  const auto rows =
      pool_->autocommit(names_ + "claim", claim_, static_cast<long long>(limit), token,
                        static_cast<long long>(lease.count()), static_cast<long long>(max_bytes), at_least_one);
  std::vector<ClaimedEvent> events;
  events.reserve(rows.size());
  for (const auto& row : rows) events.push_back(ClaimedEvent::from_row(row));
  return events;
}

std::vector<SettledEvent> EventStore::recover_expired(std::size_t limit, int max_attempts,
                                                      std::chrono::milliseconds max_age) {
  return read_settled(retry_deadlocks([&] {
    return pool_->autocommit(names_ + "recover", recover_, static_cast<long long>(limit), max_attempts,
                             static_cast<long long>(max_age.count()));
  }));
}

std::vector<PublishedEvent> EventStore::mark_published(std::span<const std::string> event_ids,
                                                       const std::string& token) {
  if (event_ids.empty()) return {};
  const auto ids = marked_ids(event_ids);
  const auto rows = retry_deadlocks(
      [&] { return pool_->autocommit(names_ + "published", mark_published_, ids.array, token, ids.first, ids.last); });
  std::vector<PublishedEvent> published;
  published.reserve(rows.size());
  for (const auto& row : rows)
    published.push_back({row["topic"].as<std::string>(), row["seconds_since_emit"].as<double>()});
  return published;
}

std::vector<SettledEvent> EventStore::record_failure(std::span<const std::string> event_ids, const std::string& token,
                                                     const std::string& error, const FailurePolicy& policy) {
  if (event_ids.empty()) return {};
  const auto ids = marked_ids(event_ids);
  return read_settled(retry_deadlocks([&] {
    return pool_->autocommit(names_ + "failed", mark_failed_, ids.array, token, error,
                             static_cast<long long>(policy.backoff.base.count()),
                             static_cast<long long>(policy.backoff.cap.count()), policy.max_attempts, policy.permanent,
                             static_cast<long long>(policy.max_age.count()), ids.first, ids.last);
  }));
}

std::vector<SettledEvent> EventStore::refuse(std::span<const std::string> event_ids,
                                             std::span<const std::string> errors, const std::string& token,
                                             const std::string& dead_reason) {
  if (event_ids.empty()) return {};
  const auto ids = marked_ids(event_ids);
  const auto error_texts = pg_array(errors);
  return read_settled(retry_deadlocks([&] {
    return pool_->autocommit(names_ + "refused", mark_refused_, ids.array, token, error_texts, dead_reason, ids.first,
                             ids.last);
  }));
}

}  // namespace boxcar::detail
