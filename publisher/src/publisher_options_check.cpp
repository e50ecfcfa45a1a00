// Option checks of the publisher (librdkafka's own checks run when the producer is made).
#include "publisher_options_check.hpp"

#include "boxcar/core/error.hpp"
#include "boxcar/core/sql_identifier.hpp"

namespace boxcar::detail {

std::string check_publisher_options(const ConnectionPool* pool, const PublisherOptions& options) {
  if (!pool) throw ConfigError("publisher.pool", "a connection pool is required");
  std::string schema = validate_schema_name(options.schema, "schema");
  if (options.batch_size == 0) throw ConfigError("publisher.batch_size", "must be at least 1");
  if (options.max_in_flight_batches == 0) throw ConfigError("publisher.max_in_flight_batches", "must be at least 1");
  if (options.max_in_flight_bytes == 0) throw ConfigError("publisher.max_in_flight_bytes", "must be at least 1");
  if (options.max_age.count() < 0) throw ConfigError("publisher.max_age_ms", "must be 0 (no limit) or more");
  if (options.max_attempts < 0) throw ConfigError("publisher.max_attempts", "must be 0 (no limit) or more");
  if (options.delivery_timeout < std::chrono::seconds(1))
    throw ConfigError("publisher.delivery_timeout_ms", "must be at least 1 s");
  if (options.lease < options.delivery_timeout + std::chrono::seconds(5))
    throw ConfigError("publisher.lease_ms",
                      "must exceed publisher.delivery_timeout_ms by at least 5 s, so a claim "
                      "cannot expire while its delivery reports may still arrive");
  for (const auto& [type, topic] : options.topic_overrides)
    if (type.empty() || topic.empty())
      throw ConfigError("publisher.topics", "a topic override needs an event type and a topic");
  for (const auto& topic : options.allowed_topics)
    if (topic.empty()) throw ConfigError("publisher.allowed_topics", "a topic name must not be empty");
  return schema;
}

}  // namespace boxcar::detail
