// Every SQL statement of the publisher (run by EventStore, event_store.hpp). `{schema}`
// is replaced once; values are $n; every returned column has a name, read by name.
#pragma once

namespace boxcar::publisher_sql {

// Claim the oldest due events (index scan on outbox_events_due) under one token per
// batch. FOR NO KEY UPDATE: plain FOR UPDATE would also skip rows under KEY SHARE locks.
inline constexpr const char* kClaim = R"sql(
WITH due AS (
    SELECT id
    FROM {schema}.outbox_events
    WHERE status IN ('PENDING', 'RETRYABLE')
      AND available_at <= now()
    ORDER BY available_at, id
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.outbox_events AS e
SET status = 'PUBLISHING',
    claim_token = $2::uuid,
    lease_expires_at = now() + make_interval(secs => $3::double precision / 1000),
    attempts = e.attempts + 1,
    updated_at = now()
FROM due
WHERE e.id = due.id
RETURNING e.id, e.event_id::text AS event_id, e.event_type, e.schema_version, e.topic, e.message_key,
          e.tenant_scope, e.tenant_id, e.causation_id, e.correlation_id, e.traceparent,
          e.headers::text AS headers, e.payload, e.attempts
)sql";

// Batches whose publisher died or hung: due again at once (the same event ids go out
// again), or DEAD when a max_attempts ($2 > 0) is used up. The topic labels the DEAD
// ones in boxcar_publisher_events_total.
inline constexpr const char* kRecoverExpired = R"sql(
WITH expired AS (
    SELECT id
    FROM {schema}.outbox_events
    WHERE status = 'PUBLISHING'
      AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.outbox_events AS e
SET status = CASE WHEN $2 > 0 AND e.attempts >= $2 THEN 'DEAD' ELSE 'RETRYABLE' END,
    dead_reason = CASE WHEN $2 > 0 AND e.attempts >= $2 THEN 'LEASE_EXPIRED_EXHAUSTED' END,
    last_error = 'the publisher holding the claim died or hung (lease expired)',
    available_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now()
FROM expired
WHERE e.id = expired.id
RETURNING e.status, e.topic
)sql";

// Delivered: one statement for the batch, guarded by its claim token.
inline constexpr const char* kMarkPublished = R"sql(
UPDATE {schema}.outbox_events
SET status = 'PUBLISHED',
    published_at = now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL,
    updated_at = now()
WHERE id = ANY($1::bigint[])
  AND claim_token = $2::uuid
  AND status = 'PUBLISHING'
RETURNING topic, extract(epoch FROM now() - created_at)::float8 AS seconds_since_emit
)sql";

// Not delivered: retry after a full-jitter backoff (base $4 ms doubling per attempt up to
// cap $5 ms), or DEAD when a max_attempts ($6 > 0) is used up. $3 is the error text.
inline constexpr const char* kMarkFailed = R"sql(
UPDATE {schema}.outbox_events
SET status = CASE WHEN $6 > 0 AND attempts >= $6 THEN 'DEAD' ELSE 'RETRYABLE' END,
    dead_reason = CASE WHEN $6 > 0 AND attempts >= $6 THEN 'ATTEMPTS_EXHAUSTED' END,
    available_at = now() + make_interval(secs => random() *
        least($5::double precision, $4::double precision * power(2, attempts - 1)) / 1000),
    last_error = $3,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now()
WHERE id = ANY($1::bigint[])
  AND claim_token = $2::uuid
  AND status = 'PUBLISHING'
RETURNING status, topic
)sql";

}  // namespace boxcar::publisher_sql
