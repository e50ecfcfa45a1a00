// Every SQL statement of the publisher (run by EventStore, event_store.hpp). `{schema}`
// is replaced once; values are $n; every returned column has a name, read by name.
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
#pragma once

namespace boxcar::publisher_sql {

// Claim the oldest due events (index scan on outbox_events_due_covering) under one token per
// batch, up to $1 events and a byte budget $4: events are taken in order while their
// running total stays within it; the first is taken regardless when $5 (nothing else is
// in flight), so an event larger than the budget still goes out, alone. `bytes` is an upper
// bound of the record's size as boxcar/outbox/record_size.hpp measures it: 512 covers the
// framing, the reserved header names and their fixed-size values (event id, schema
// version, tenant scope). FOR NO KEY UPDATE: plain FOR UPDATE would also skip rows under
// KEY SHARE locks. The window runs in its own CTE: FOR UPDATE cannot share a query level
// with it; rows locked but over the budget are released when the statement ends.
// The update finds each claimed row by its partition key too (event_id, beside id): the
// nested loop then probes the one partition that holds it (run-time pruning), where by id
// alone it probed every partition, which doubled the claim's time with the seven daily
// partitions ahead (docs/benchmarks.md, "Generic plans").
inline constexpr const char* kClaim = R"sql(
WITH due AS (
    SELECT id, event_id, available_at,
           512 + pg_catalog.octet_length(payload) + pg_catalog.octet_length(message_key) + pg_catalog.octet_length(headers::text)
               + pg_catalog.octet_length(event_type) + pg_catalog.octet_length(tenant_id) + pg_catalog.octet_length(causation_id)
               + pg_catalog.octet_length(correlation_id) + pg_catalog.octet_length(traceparent) AS bytes
    FROM {schema}.outbox_events
    WHERE status IN ('PENDING', 'RETRYABLE')
      AND available_at <= pg_catalog.now()
    ORDER BY available_at, id
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
),
within_budget AS (
    SELECT id, event_id
    FROM (SELECT id, event_id, bytes, pg_catalog.sum(bytes) OVER (ORDER BY available_at, id) - bytes AS bytes_before
          FROM due) AS running
    WHERE bytes_before + bytes <= $4::bigint
       OR (bytes_before = 0 AND $5::boolean)
)
UPDATE {schema}.outbox_events AS e
SET status = 'PUBLISHING',
    claim_token = $2::uuid,
    lease_expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => $3::double precision / 1000::double precision),
    attempts = e.attempts + 1,
    updated_at = pg_catalog.now()
FROM within_budget
WHERE e.event_id = within_budget.event_id
  AND e.id = within_budget.id
RETURNING e.id, e.event_id::text AS event_id, e.event_type, e.schema_version, e.topic, e.message_key,
          e.tenant_scope, e.tenant_id, e.causation_id, e.correlation_id, e.traceparent,
          e.headers::text AS headers, e.payload, e.attempts
)sql";

// Batches whose publisher died or hung: due again at once (the same event ids go out
// again), or DEAD when a max_attempts ($2 > 0) is used up or the event is older than the
// max age ($3 ms > 0: a record that kills or hangs every publisher ends too). The topic
// labels the DEAD ones in boxcar_publisher_events_total. Rows are found by event_id and
// id, as kClaim finds them.
inline constexpr const char* kRecoverExpired = R"sql(
WITH expired AS (
    SELECT id, event_id,
           CASE WHEN $2 > 0 AND attempts >= $2 THEN 'LEASE_EXPIRED_EXHAUSTED'
                WHEN $3::bigint > 0
                     AND created_at <= pg_catalog.now() - pg_catalog.make_interval(secs => $3::double precision / 1000::double precision)
                    THEN 'MAX_AGE_EXCEEDED'
           END AS dead_reason
    FROM {schema}.outbox_events
    WHERE status = 'PUBLISHING'
      AND lease_expires_at < pg_catalog.now()
    ORDER BY lease_expires_at
    LIMIT $1
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.outbox_events AS e
SET status = CASE WHEN expired.dead_reason IS NULL THEN 'RETRYABLE' ELSE 'DEAD' END,
    dead_reason = expired.dead_reason,
    last_error = 'the publisher holding the claim died or hung (lease expired)',
    available_at = pg_catalog.now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = pg_catalog.now()
FROM expired
WHERE e.event_id = expired.event_id
  AND e.id = expired.id
RETURNING e.status, e.topic
)sql";

// The marks below name a batch's events by event_id ($1 uuid[]), the partition key: a
// custom plan reads only the partitions they are in, through each one's event_id index,
// where the id would probe the id index of every partition (0018). A generic plan cannot
// prune by an array parameter, so each mark also bounds event_id by the batch's smallest
// and largest id (two uuid parameters, EventStore computes them): the executor then
// removes every partition outside that range as it starts, where it would otherwise probe
// each partition's event_id index once per event, the retained days' too (at 10M retained
// events, 4,000 index pages per mark of 1,000; docs/benchmarks.md, "Generic plans").
// They are guarded by the claim token alone: it implies PUBLISHING (CHECK outbox_events_claim), and a
// `status = 'PUBLISHING'` predicate lets the planner pick each partition's leases index
// instead, which ANALYZE usually saw nearly empty and which under load holds every event
// in flight (the same trap as the worker's, inbox/src/worker_queries.hpp).

// Delivered: one statement for the batch, guarded by its claim token.
inline constexpr const char* kMarkPublished = R"sql(
UPDATE {schema}.outbox_events
SET status = 'PUBLISHED',
    published_at = pg_catalog.now(),
    claim_token = NULL,
    lease_expires_at = NULL,
    last_error = NULL,
    updated_at = pg_catalog.now()
WHERE event_id = ANY($1::uuid[])
  AND event_id >= $3::uuid
  AND event_id <= $4::uuid
  AND claim_token = $2::uuid
RETURNING topic, extract(epoch FROM pg_catalog.now() - created_at)::float8 AS seconds_since_emit
)sql";

// Not delivered: retry after a full-jitter backoff (base $4 ms doubling per attempt up to
// cap $5 ms), or DEAD: at once when the failure is permanent ($7: the producer refused the
// record as too large, it can never be produced), when a max_attempts ($6 > 0) is used up,
// or when the event is older than the max age ($8 ms > 0). $3 is the error text; $9 and
// $10 bound the batch's event ids. The exponent stops at 60 (2^60 ms is far past any
// cap): pg_catalog.power(2, attempts - 1) overflows a double past attempt 1024 and would
// fail the statement, leaving the batch claimed.
inline constexpr const char* kMarkFailed = R"sql(
WITH verdict AS (
    SELECT event_id,
           CASE WHEN $7::boolean THEN 'RECORD_TOO_LARGE'
                WHEN $6 > 0 AND attempts >= $6 THEN 'ATTEMPTS_EXHAUSTED'
                WHEN $8::bigint > 0
                     AND created_at <= pg_catalog.now() - pg_catalog.make_interval(secs => $8::double precision / 1000::double precision)
                    THEN 'MAX_AGE_EXCEEDED'
           END AS dead_reason,
           least($5::double precision,
                 $4::double precision * pg_catalog.power(2::double precision, least(greatest(attempts - 1, 0), 60)))
               AS backoff_ceiling_ms
    FROM {schema}.outbox_events
    WHERE event_id = ANY($1::uuid[])
      AND event_id >= $9::uuid
      AND event_id <= $10::uuid
      AND claim_token = $2::uuid
)
UPDATE {schema}.outbox_events AS e
SET status = CASE WHEN verdict.dead_reason IS NULL THEN 'RETRYABLE' ELSE 'DEAD' END,
    dead_reason = verdict.dead_reason,
    available_at = pg_catalog.now() + pg_catalog.make_interval(secs => pg_catalog.random() * verdict.backoff_ceiling_ms / 1000::double precision),
    last_error = $3,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = pg_catalog.now()
FROM verdict
WHERE e.event_id = verdict.event_id
  AND e.event_id = ANY($1::uuid[])
  AND e.event_id >= $9::uuid
  AND e.event_id <= $10::uuid
  AND e.claim_token = $2::uuid
RETURNING e.status, e.topic
)sql";

// Refused before producing (publisher.allowed_topics): DEAD at once, never produced,
// guarded by the batch's claim token. $1 uuid[] of event ids and $3 text[] of their error
// texts, pairwise; $4 the dead reason; $5 and $6 bound the event ids. ROWS FROM with
// qualified functions: the two-array unnest(a, b) shorthand resolves each unnest through
// the search_path.
inline constexpr const char* kMarkRefused = R"sql(
UPDATE {schema}.outbox_events AS e
SET status = 'DEAD',
    dead_reason = $4,
    last_error = r.error,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::uuid[]), pg_catalog.unnest($3::text[])) AS r(event_id, error)
WHERE e.event_id = r.event_id
  AND e.event_id = ANY($1::uuid[])
  AND e.event_id >= $5::uuid
  AND e.event_id <= $6::uuid
  AND e.claim_token = $2::uuid
RETURNING e.status, e.topic
)sql";

}  // namespace boxcar::publisher_sql
