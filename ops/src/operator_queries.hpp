// Every SQL statement of the operator commands: status (operator_status.cpp), dead
// records (dead_records.cpp) and retention (retention.cpp). `{schema}` is replaced by the
// quoted schema name with with_schema(); values are always $n parameters; results are
// read by column name, so every computed column is named here.
//
// The failure fingerprint and the DEAD-record columns live in the database, in the
// function failure_fingerprint() and the views inbox_dead_records / outbox_dead_records
// of migrations/0004_operator_views.sql. Built-ins are called as pg_catalog.<name>: these
// statements run under the application's search_path (see docs/schema.md).
//
// These statements run through exec_params (the unnamed statement), not prepared once per
// connection like the hot paths: each is run rarely, and the optional-filter pattern
// `($2 = '' OR consumer = $2)` needs a custom plan per call to use the DEAD indexes,
// which a cached generic plan would lose.
//
// Dead-record statements that filter share one parameter layout, so one binder serves
// them all, and repeat one WHERE clause (change it in every statement that has it):
//   $1 ids (bigint[] literal, '{}' = any)   $2 consumer ('' = any; outbox: always '')
//   $3 event_type ('' = any)                 $4 error substring ('' = any)
//   $5 older than seconds (-1 = any)         $6 failure group ('' = any)
//   $7 limit                                 $8 actor (retry/discard only)
// Timestamps cross into C++ as microseconds since the epoch (`*_us` columns), independent
// of the session's DateStyle and TimeZone.
#pragma once

namespace boxcar::detail::operator_sql {

// ---------------------------------------------------------------------------------------
// status

// One exact pass over the table: per consumer and status, live and discarded counts and
// the oldest due backlog row.
inline constexpr const char* kInboxStatus = R"sql(
SELECT consumer,
       status,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NULL) AS live,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NOT NULL) AS discarded,
       coalesce((EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(available_at) FILTER (
           WHERE status IN ('PENDING', 'RETRYABLE')
             AND available_at <= pg_catalog.now())) * 1000::numeric)::bigint, 0) AS oldest_due_age_ms
FROM {schema}.inbox_receipts
GROUP BY consumer, status
ORDER BY consumer, status
)sql";

inline constexpr const char* kOutboxStatus = R"sql(
SELECT status,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NULL) AS live,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NOT NULL) AS discarded,
       coalesce((EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(created_at) FILTER (
           WHERE status IN ('PENDING', 'WAITING', 'PUBLISHING', 'RETRYABLE'))) * 1000::numeric)::bigint, 0)
           AS oldest_unpublished_age_ms
FROM {schema}.outbox_events
GROUP BY status
ORDER BY status
)sql";

// Keys whose head failed (docs/ordering.md): from inbox_ordering_keys_blocked, oldest
// first, each with its scope, its head receipt and how many receipts wait behind it (an
// index-only count on inbox_receipts_waiting, which leads with the key's consumer, scope
// and key, at most $2 + 1 read). $1: keys at most.
inline constexpr const char* kBlockedKeys = R"sql(
SELECT k.consumer,
       k.scope_kind,
       k.scope_id,
       k.ordering_key,
       k.head_id,
       r.status AS head_status,
       r.attempts AS head_attempts,
       coalesce(r.last_error_type, '') AS head_error_type,
       coalesce(r.last_error, '') AS head_error,
       (EXTRACT(epoch FROM pg_catalog.now() - k.blocked_since) * 1000::numeric)::bigint AS blocked_ms,
       (SELECT pg_catalog.count(*)
        FROM (SELECT 1
              FROM {schema}.inbox_receipts AS w
              WHERE w.consumer = k.consumer
                AND w.scope_kind = k.scope_kind
                AND w.scope_id = k.scope_id
                AND w.ordering_key = k.ordering_key
                AND w.status = 'WAITING'
              LIMIT $2::bigint + 1::bigint) AS behind) AS waiting
FROM {schema}.inbox_ordering_keys AS k
JOIN {schema}.inbox_receipts AS r ON r.id = k.head_id
WHERE k.blocked_since IS NOT NULL
ORDER BY k.blocked_since, k.consumer, k.scope_kind, k.scope_id, k.ordering_key
LIMIT $1::bigint
)sql";

// `boxcar dead unblock KEY`: the DEAD receipt that blocks key $2 (of consumer $1, '' =
// any; of scope kind $3 and id $4, $3 '' = any scope) stops blocking it, released by $5;
// the key-order trigger (0034) then promotes the key's next receipt. The receipt stays
// DEAD, listed and replayable.
inline constexpr const char* kUnblockKey = R"sql(
UPDATE {schema}.inbox_receipts AS r
SET key_released_at = pg_catalog.now(),
    key_released_by = $5::text,
    updated_at = pg_catalog.now()
FROM {schema}.inbox_ordering_keys AS k
WHERE k.ordering_key = $2::text
  AND ($1::text = '' OR k.consumer = $1::text)
  AND ($3::text = '' OR (k.scope_kind = $3::text AND k.scope_id = $4::text))
  AND r.id = k.head_id
  AND r.status = 'DEAD'
  AND r.park_after IS NULL
  AND r.key_released_at IS NULL
  AND r.discarded_at IS NULL
RETURNING r.id, r.consumer, r.scope_kind, r.scope_id
)sql";

// ---------------------------------------------------------------------------------------
// dead list / show. The list is also the dry run of retry and discard: the ids it returns
// are the ones those statements would take now.

inline constexpr const char* kInboxDeadList = R"sql(
SELECT d.id,
       d.scope_kind,
       d.scope_id,
       d.source,
       d.consumer,
       d.message_id,
       d.event_type,
       d.schema_version,
       d.attempts,
       d.dead_reason,
       d.last_error_type,
       d.last_error,
       d.failure,
       d.failure_group,
       d.replay_count,
       d.last_replayed_by,
       d.discarded_by,
       (EXTRACT(epoch FROM d.created_at) * 1000000::numeric)::bigint AS created_at_us,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us,
       (EXTRACT(epoch FROM d.discarded_at) * 1000000::numeric)::bigint AS discarded_at_us
FROM {schema}.inbox_dead_records AS d
WHERE d.discarded_at IS NULL
  AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
  AND ($2::text = '' OR d.consumer = $2::text)
  AND ($3::text = '' OR d.event_type = $3::text)
  AND ($4::text = ''
       OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0
       OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error_type, '')), pg_catalog.lower($4::text)) > 0)
  AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
  AND ($6::text = '' OR d.failure_group = $6::text)
ORDER BY d.updated_at, d.id
LIMIT $7
)sql";

// $2 is bound (always '') only to keep one parameter layout for both kinds: the API
// rejects a consumer filter for outbox events.
inline constexpr const char* kOutboxDeadList = R"sql(
SELECT d.id,
       d.tenant_scope,
       d.tenant_id,
       d.event_id::text AS event_id,
       d.topic,
       d.message_key,
       d.event_type,
       d.schema_version,
       d.attempts,
       d.dead_reason,
       d.last_error,
       d.failure,
       d.failure_group,
       d.replay_count,
       d.last_replayed_by,
       d.discarded_by,
       (EXTRACT(epoch FROM d.created_at) * 1000000::numeric)::bigint AS created_at_us,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us,
       (EXTRACT(epoch FROM d.discarded_at) * 1000000::numeric)::bigint AS discarded_at_us
FROM {schema}.outbox_dead_records AS d
WHERE d.discarded_at IS NULL
  AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
  AND $2::text = ''
  AND ($3::text = '' OR d.event_type = $3::text)
  AND ($4::text = ''
       OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0)
  AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
  AND ($6::text = '' OR d.failure_group = $6::text)
ORDER BY d.updated_at, d.id
LIMIT $7
)sql";

// A DEAD row by id ($1), discarded or not (showing what was discarded is part of the
// audit), with its content.
inline constexpr const char* kInboxDeadShow = R"sql(
SELECT d.id,
       d.scope_kind,
       d.scope_id,
       d.source,
       d.consumer,
       d.message_id,
       d.event_type,
       d.schema_version,
       d.attempts,
       d.dead_reason,
       d.last_error_type,
       d.last_error,
       d.failure,
       d.failure_group,
       d.replay_count,
       d.last_replayed_by,
       d.discarded_by,
       (EXTRACT(epoch FROM d.created_at) * 1000000::numeric)::bigint AS created_at_us,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us,
       (EXTRACT(epoch FROM d.discarded_at) * 1000000::numeric)::bigint AS discarded_at_us,
       d.fingerprint AS content_fingerprint,
       d.payload::text AS payload,
       d.metadata::text AS metadata
FROM {schema}.inbox_dead_records AS d
WHERE d.id = $1
)sql";

// Outbox events keep their routing context beside the payload: it is shown as metadata.
inline constexpr const char* kOutboxDeadShow = R"sql(
SELECT d.id,
       d.tenant_scope,
       d.tenant_id,
       d.event_id::text AS event_id,
       d.topic,
       d.message_key,
       d.event_type,
       d.schema_version,
       d.attempts,
       d.dead_reason,
       d.last_error,
       d.failure,
       d.failure_group,
       d.replay_count,
       d.last_replayed_by,
       d.discarded_by,
       (EXTRACT(epoch FROM d.created_at) * 1000000::numeric)::bigint AS created_at_us,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us,
       (EXTRACT(epoch FROM d.discarded_at) * 1000000::numeric)::bigint AS discarded_at_us,
       d.payload,
       pg_catalog.jsonb_build_object('headers', d.headers,
                                     'causation_id', d.causation_id,
                                     'correlation_id', d.correlation_id,
                                     'traceparent', d.traceparent)::text AS metadata
FROM {schema}.outbox_dead_records AS d
WHERE d.id = $1
)sql";

// ---------------------------------------------------------------------------------------
// dead groups: the matching records grouped by failure, largest group first; $7 limits
// the number of groups. Distinct values come back as JSON arrays (libpqxx 6 has no array
// reader worth using).

inline constexpr const char* kInboxDeadGroups = R"sql(
SELECT d.failure_group,
       d.failure,
       pg_catalog.count(*) AS records,
       (EXTRACT(epoch FROM pg_catalog.min(d.updated_at)) * 1000000::numeric)::bigint AS first_seen_us,
       (EXTRACT(epoch FROM pg_catalog.max(d.updated_at)) * 1000000::numeric)::bigint AS last_seen_us,
       pg_catalog.jsonb_agg(DISTINCT d.consumer)::text AS consumers,
       pg_catalog.jsonb_agg(DISTINCT d.event_type)::text AS event_types,
       '[]' AS topics,
       pg_catalog.jsonb_agg(DISTINCT d.dead_reason)::text AS dead_reasons
FROM {schema}.inbox_dead_records AS d
WHERE d.discarded_at IS NULL
  AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
  AND ($2::text = '' OR d.consumer = $2::text)
  AND ($3::text = '' OR d.event_type = $3::text)
  AND ($4::text = ''
       OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0
       OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error_type, '')), pg_catalog.lower($4::text)) > 0)
  AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
  AND ($6::text = '' OR d.failure_group = $6::text)
GROUP BY d.failure, d.failure_group
ORDER BY pg_catalog.count(*) DESC, d.failure
LIMIT $7
)sql";

inline constexpr const char* kOutboxDeadGroups = R"sql(
SELECT d.failure_group,
       d.failure,
       pg_catalog.count(*) AS records,
       (EXTRACT(epoch FROM pg_catalog.min(d.updated_at)) * 1000000::numeric)::bigint AS first_seen_us,
       (EXTRACT(epoch FROM pg_catalog.max(d.updated_at)) * 1000000::numeric)::bigint AS last_seen_us,
       '[]' AS consumers,
       pg_catalog.jsonb_agg(DISTINCT d.event_type)::text AS event_types,
       pg_catalog.jsonb_agg(DISTINCT d.topic)::text AS topics,
       pg_catalog.jsonb_agg(DISTINCT d.dead_reason)::text AS dead_reasons
FROM {schema}.outbox_dead_records AS d
WHERE d.discarded_at IS NULL
  AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
  AND $2::text = ''
  AND ($3::text = '' OR d.event_type = $3::text)
  AND ($4::text = ''
       OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0)
  AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
  AND ($6::text = '' OR d.failure_group = $6::text)
GROUP BY d.failure, d.failure_group
ORDER BY pg_catalog.count(*) DESC, d.failure
LIMIT $7
)sql";

// ---------------------------------------------------------------------------------------
// dead retry / discard: one statement each. The CTE locks the chosen rows through the
// view (skipping rows another session holds, e.g. a concurrent operator) and re-checks
// the filter on the latest row version, so a row retried or discarded meanwhile is not
// changed twice.

// Back to the start of its life: PENDING, no attempts, due now. dead_reason must go (the
// table requires it exactly while DEAD); last_error(_type) stay as history.
inline constexpr const char* kInboxRetry = R"sql(
WITH matching AS (
    SELECT d.id
    FROM {schema}.inbox_dead_records AS d
    WHERE d.discarded_at IS NULL
      AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
      AND ($2::text = '' OR d.consumer = $2::text)
      AND ($3::text = '' OR d.event_type = $3::text)
      AND ($4::text = ''
           OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0
           OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error_type, '')), pg_catalog.lower($4::text)) > 0)
      AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
      AND ($6::text = '' OR d.failure_group = $6::text)
    ORDER BY d.updated_at, d.id
    LIMIT $7
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET status = 'PENDING',
    attempts = 0,
    finished_attempts = 0,
    available_at = pg_catalog.now(),
    dead_reason = NULL,
    -- A new life gets its uncharged hand-backs of database outages again (worker.md).
    outage_hand_backs = 0,
    -- A replayed receipt of an ordered key holds its key again (0012's trigger: it waits
    -- behind the key's head, if another has become it, and comes next).
    key_released_at = NULL,
    replay_count = r.replay_count + 1,
    last_replayed_at = pg_catalog.now(),
    last_replayed_by = $8::text,
    updated_at = pg_catalog.now()
FROM matching
WHERE r.id = matching.id
RETURNING r.id
)sql";

inline constexpr const char* kOutboxRetry = R"sql(
WITH matching AS (
    SELECT d.id
    FROM {schema}.outbox_dead_records AS d
    WHERE d.discarded_at IS NULL
      AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
      AND $2::text = ''
      AND ($3::text = '' OR d.event_type = $3::text)
      AND ($4::text = ''
           OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0)
      AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
      AND ($6::text = '' OR d.failure_group = $6::text)
    ORDER BY d.updated_at, d.id
    LIMIT $7
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.outbox_events AS e
SET status = 'PENDING',
    attempts = 0,
    available_at = pg_catalog.now(),
    dead_reason = NULL,
    replay_count = e.replay_count + 1,
    last_replayed_at = pg_catalog.now(),
    last_replayed_by = $8::text,
    updated_at = pg_catalog.now()
FROM matching
WHERE e.id = matching.id
RETURNING e.id
)sql";

// The row stays DEAD (so its identity keeps deduplicating redeliveries); only the
// discard is recorded.
inline constexpr const char* kInboxDiscard = R"sql(
WITH matching AS (
    SELECT d.id
    FROM {schema}.inbox_dead_records AS d
    WHERE d.discarded_at IS NULL
      AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
      AND ($2::text = '' OR d.consumer = $2::text)
      AND ($3::text = '' OR d.event_type = $3::text)
      AND ($4::text = ''
           OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0
           OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error_type, '')), pg_catalog.lower($4::text)) > 0)
      AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
      AND ($6::text = '' OR d.failure_group = $6::text)
    ORDER BY d.updated_at, d.id
    LIMIT $7
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET discarded_at = pg_catalog.now(),
    discarded_by = $8::text,
    updated_at = pg_catalog.now()
FROM matching
WHERE r.id = matching.id
RETURNING r.id
)sql";

inline constexpr const char* kOutboxDiscard = R"sql(
WITH matching AS (
    SELECT d.id
    FROM {schema}.outbox_dead_records AS d
    WHERE d.discarded_at IS NULL
      AND (pg_catalog.cardinality($1::bigint[]) = 0 OR d.id = ANY ($1::bigint[]))
      AND $2::text = ''
      AND ($3::text = '' OR d.event_type = $3::text)
      AND ($4::text = ''
           OR pg_catalog.strpos(pg_catalog.lower(coalesce(d.last_error, '')), pg_catalog.lower($4::text)) > 0)
      AND ($5::bigint < 0 OR d.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $5::double precision))
      AND ($6::text = '' OR d.failure_group = $6::text)
    ORDER BY d.updated_at, d.id
    LIMIT $7
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.outbox_events AS e
SET discarded_at = pg_catalog.now(),
    discarded_by = $8::text,
    updated_at = pg_catalog.now()
FROM matching
WHERE e.id = matching.id
RETURNING e.id
)sql";

// Best-effort wake-up of idle workers / publishers after a retry ($1 = channel).
inline constexpr const char* kNotify = R"sql(
SELECT pg_catalog.pg_notify($1, '')
)sql";

}  // namespace boxcar::detail::operator_sql
