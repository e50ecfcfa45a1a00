// Every SQL statement of the operator commands (status, dead ..., purge). `{schema}` is
// replaced by the quoted schema name with with_schema(); values are always $n parameters.
//
// These statements run through exec_params (the unnamed statement), not prepared once per
// connection like the hot paths: each is run rarely, and the optional-filter pattern
// `($2 = '' OR consumer = $2)` needs a custom plan per call to use the DEAD indexes,
// which a cached generic plan would lose.
//
// Dead-record statements share one parameter layout so one binder serves them all:
//   $1 ids (bigint[] literal, '{}' = any)   $2 consumer ('' = any)
//   $3 event_type ('' = any)                 $4 error substring ('' = any)
//   $5 older than seconds (-1 = any)         $6 group key ('' = any)
//   $7 limit                                 $8 actor (retry/discard only)
#pragma once

namespace boxcar::operator_sql {

// The failure fingerprint: "<type>: <message>" with UUIDs, 0x-hex, long mixed hex ids
// (at least 6 hex digits with a letter and a digit, so words such as "deadline" or
// "cafe" survive) and then digit runs masked, in that order (masking digits first would
// break the UUIDs and hex ids apart). Two failures that differ only in an order number
// or a request id share a fingerprint. '\m' / '\M' are PostgreSQL's word boundaries.
#define BOXCAR_OP_FAILURE(type_expr, message_expr)                                          \
  "coalesce(" type_expr ", '') || ': ' ||\n"                                                \
  "        regexp_replace(\n"                                                               \
  "            regexp_replace(\n"                                                           \
  "                regexp_replace(\n"                                                       \
  "                    regexp_replace(\n"                                                   \
  "                        coalesce(" message_expr ", ''),\n"                               \
  "                        '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',\n" \
  "                        '<uuid>', 'gi'),\n"                                              \
  "                    '\\m0x[0-9a-f]+\\M', '<hex>', 'gi'),\n"                              \
  "                '\\m(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\\M', '<hex>', 'gi'),\n" \
  "            '[0-9]+', '<n>', 'g')"

// Microseconds since the epoch: timestamps cross into C++ as integers, independent of
// the session's DateStyle and TimeZone.
#define BOXCAR_OP_MICROS(column) "(extract(epoch FROM " column ") * 1000000)::bigint"

// The DEAD, not discarded, rows a filter selects, with their fingerprint as f.failure.
// The inbox_receipts_dead index (consumer, updated_at) serves consumer and age filters.
#define BOXCAR_OP_INBOX_DEAD                                                                  \
  "FROM {schema}.inbox_receipts AS r\n"                                                       \
  "CROSS JOIN LATERAL (\n"                                                                    \
  "    SELECT " BOXCAR_OP_FAILURE("r.last_error_type", "r.last_error") "\n"                   \
  ") AS f(failure)\n"                                                                         \
  "WHERE r.status = 'DEAD'\n"                                                                 \
  "  AND r.discarded_at IS NULL\n"                                                            \
  "  AND (cardinality($1::bigint[]) = 0 OR r.id = ANY($1::bigint[]))\n"                       \
  "  AND ($2::text = '' OR r.consumer = $2::text)\n"                                          \
  "  AND ($3::text = '' OR r.event_type = $3::text)\n"                                        \
  "  AND ($4::text = ''\n"                                                                    \
  "       OR strpos(lower(coalesce(r.last_error, '')), lower($4::text)) > 0\n"                \
  "       OR strpos(lower(coalesce(r.last_error_type, '')), lower($4::text)) > 0)\n"          \
  "  AND ($5::bigint < 0 OR r.updated_at < now() - make_interval(secs => $5::double precision))\n" \
  "  AND ($6::text = '' OR left(md5(f.failure), 12) = $6::text)\n"

// Outbox events have no consumer and no error type: the dead reason stands in for the
// type in the fingerprint, and $2 is bound (always '') only to keep one parameter layout
// for both kinds (the API rejects a consumer filter for outbox events).
#define BOXCAR_OP_OUTBOX_DEAD                                                                 \
  "FROM {schema}.outbox_events AS r\n"                                                        \
  "CROSS JOIN LATERAL (\n"                                                                    \
  "    SELECT " BOXCAR_OP_FAILURE("r.dead_reason", "r.last_error") "\n"                       \
  ") AS f(failure)\n"                                                                         \
  "WHERE r.status = 'DEAD'\n"                                                                 \
  "  AND r.discarded_at IS NULL\n"                                                            \
  "  AND (cardinality($1::bigint[]) = 0 OR r.id = ANY($1::bigint[]))\n"                       \
  "  AND $2::text = ''\n"                                                                     \
  "  AND ($3::text = '' OR r.event_type = $3::text)\n"                                        \
  "  AND ($4::text = '' OR strpos(lower(coalesce(r.last_error, '')), lower($4::text)) > 0)\n" \
  "  AND ($5::bigint < 0 OR r.updated_at < now() - make_interval(secs => $5::double precision))\n" \
  "  AND ($6::text = '' OR left(md5(f.failure), 12) = $6::text)\n"

// One column layout for both kinds, read by read_record() in operator.cpp:
//  0 id, 1 scope kind, 2 scope id, 3 source, 4 consumer, 5 message_id, 6 event_id, 7 topic,
//  8 message_key, 9 event_type, 10 schema_version, 11 attempts, 12 dead_reason,
//  13 last_error_type, 14 last_error, 15 created_at, 16 updated_at, 17 replay_count,
//  18 last_replayed_at, 19 last_replayed_by, 20 discarded_at, 21 discarded_by,
//  22 failure, 23 group key; dead_show adds 24 content fingerprint, 25 payload, 26 metadata.
#define BOXCAR_OP_INBOX_COLUMNS                                                               \
  "SELECT r.id, r.scope_kind, r.scope_id, r.source, r.consumer, r.message_id,\n"              \
  "       '', '', '',\n"                                                                      \
  "       r.event_type, r.schema_version, r.attempts, coalesce(r.dead_reason, ''),\n"         \
  "       coalesce(r.last_error_type, ''), coalesce(r.last_error, ''),\n"                     \
  "       " BOXCAR_OP_MICROS("r.created_at") ", " BOXCAR_OP_MICROS("r.updated_at") ",\n"       \
  "       r.replay_count, " BOXCAR_OP_MICROS("r.last_replayed_at") ",\n"                      \
  "       coalesce(r.last_replayed_by, ''),\n"                                                \
  "       " BOXCAR_OP_MICROS("r.discarded_at") ", coalesce(r.discarded_by, ''),\n"            \
  "       f.failure, left(md5(f.failure), 12)"

#define BOXCAR_OP_OUTBOX_COLUMNS                                                              \
  "SELECT r.id, r.tenant_scope, r.tenant_id, '', '', '',\n"                                   \
  "       r.event_id::text, r.topic, r.message_key,\n"                                        \
  "       r.event_type, r.schema_version, r.attempts, coalesce(r.dead_reason, ''),\n"         \
  "       '', coalesce(r.last_error, ''),\n"                                                  \
  "       " BOXCAR_OP_MICROS("r.created_at") ", " BOXCAR_OP_MICROS("r.updated_at") ",\n"       \
  "       r.replay_count, " BOXCAR_OP_MICROS("r.last_replayed_at") ",\n"                      \
  "       coalesce(r.last_replayed_by, ''),\n"                                                \
  "       " BOXCAR_OP_MICROS("r.discarded_at") ", coalesce(r.discarded_by, ''),\n"            \
  "       f.failure, left(md5(f.failure), 12)"

// ---------------------------------------------------------------------------------------
// status

// One exact pass over the table: per consumer and status, live and discarded counts and
// the oldest due backlog row (milliseconds).
inline constexpr const char* kInboxStatus = R"sql(
SELECT consumer,
       status,
       count(*) FILTER (WHERE discarded_at IS NULL),
       count(*) FILTER (WHERE discarded_at IS NOT NULL),
       coalesce((extract(epoch FROM now() - min(available_at) FILTER (
           WHERE status IN ('PENDING', 'RETRYABLE')
             AND available_at <= now())) * 1000)::bigint, 0)
FROM {schema}.inbox_receipts
GROUP BY consumer, status
ORDER BY consumer, status
)sql";

inline constexpr const char* kOutboxStatus = R"sql(
SELECT status,
       count(*) FILTER (WHERE discarded_at IS NULL),
       count(*) FILTER (WHERE discarded_at IS NOT NULL),
       coalesce((extract(epoch FROM now() - min(created_at) FILTER (
           WHERE status IN ('PENDING', 'PUBLISHING', 'RETRYABLE'))) * 1000)::bigint, 0)
FROM {schema}.outbox_events
GROUP BY status
ORDER BY status
)sql";

// ---------------------------------------------------------------------------------------
// dead list / show

inline constexpr const char* kInboxDeadList = BOXCAR_OP_INBOX_COLUMNS "\n" BOXCAR_OP_INBOX_DEAD R"sql(
ORDER BY r.updated_at, r.id
LIMIT $7
)sql";

inline constexpr const char* kOutboxDeadList = BOXCAR_OP_OUTBOX_COLUMNS "\n" BOXCAR_OP_OUTBOX_DEAD R"sql(
ORDER BY r.updated_at, r.id
LIMIT $7
)sql";

// A DEAD row by id, discarded or not (showing what was discarded is part of the audit).
inline constexpr const char* kInboxDeadShow = BOXCAR_OP_INBOX_COLUMNS R"sql(,
       r.fingerprint,
       r.payload::text,
       r.metadata::text
FROM {schema}.inbox_receipts AS r
CROSS JOIN LATERAL (
    SELECT )sql" BOXCAR_OP_FAILURE("r.last_error_type", "r.last_error") R"sql(
) AS f(failure)
WHERE r.id = $1
  AND r.status = 'DEAD'
)sql";

inline constexpr const char* kOutboxDeadShow = BOXCAR_OP_OUTBOX_COLUMNS R"sql(,
       '',
       r.payload,
       jsonb_build_object('headers', r.headers,
                          'causation_id', r.causation_id,
                          'correlation_id', r.correlation_id,
                          'traceparent', r.traceparent)::text
FROM {schema}.outbox_events AS r
CROSS JOIN LATERAL (
    SELECT )sql" BOXCAR_OP_FAILURE("r.dead_reason", "r.last_error") R"sql(
) AS f(failure)
WHERE r.id = $1
  AND r.status = 'DEAD'
)sql";

// ---------------------------------------------------------------------------------------
// dead groups: distinct values come back as JSON arrays (libpqxx 6 has no array reader
// worth using); first/last seen in microseconds. $7 limits the number of groups.

inline constexpr const char* kInboxDeadGroups = R"sql(
WITH dead AS (
    SELECT r.consumer,
           r.event_type,
           r.dead_reason,
           r.updated_at,
           f.failure
)sql" BOXCAR_OP_INBOX_DEAD R"sql(
)
SELECT left(md5(failure), 12),
       failure,
       count(*),
       )sql" BOXCAR_OP_MICROS("min(updated_at)") R"sql(,
       )sql" BOXCAR_OP_MICROS("max(updated_at)") R"sql(,
       jsonb_agg(DISTINCT consumer)::text,
       jsonb_agg(DISTINCT event_type)::text,
       '[]',
       jsonb_agg(DISTINCT dead_reason)::text
FROM dead
GROUP BY failure
ORDER BY count(*) DESC, failure
LIMIT $7
)sql";

inline constexpr const char* kOutboxDeadGroups = R"sql(
WITH dead AS (
    SELECT r.topic,
           r.event_type,
           r.dead_reason,
           r.updated_at,
           f.failure
)sql" BOXCAR_OP_OUTBOX_DEAD R"sql(
)
SELECT left(md5(failure), 12),
       failure,
       count(*),
       )sql" BOXCAR_OP_MICROS("min(updated_at)") R"sql(,
       )sql" BOXCAR_OP_MICROS("max(updated_at)") R"sql(,
       '[]',
       jsonb_agg(DISTINCT event_type)::text,
       jsonb_agg(DISTINCT topic)::text,
       jsonb_agg(DISTINCT dead_reason)::text
FROM dead
GROUP BY failure
ORDER BY count(*) DESC, failure
LIMIT $7
)sql";

// ---------------------------------------------------------------------------------------
// dead retry / discard: one statement each. The CTE locks the chosen rows (skipping rows
// another session holds, e.g. a concurrent operator) and re-checks the filter on the
// latest row version, so a row retried or discarded meanwhile is not changed twice.

// Back to the start of its life: PENDING, no attempts, due now. dead_reason must go (the
// table requires it exactly while DEAD); last_error(_type) stay as history.
inline constexpr const char* kInboxRetry = R"sql(
WITH matching AS (
    SELECT r.id
)sql" BOXCAR_OP_INBOX_DEAD R"sql(
    ORDER BY r.updated_at, r.id
    LIMIT $7
    FOR NO KEY UPDATE OF r SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET status = 'PENDING',
    attempts = 0,
    finished_attempts = 0,
    available_at = now(),
    dead_reason = NULL,
    replay_count = r.replay_count + 1,
    last_replayed_at = now(),
    last_replayed_by = $8::text,
    updated_at = now()
FROM matching
WHERE r.id = matching.id
RETURNING r.id
)sql";

inline constexpr const char* kOutboxRetry = R"sql(
WITH matching AS (
    SELECT r.id
)sql" BOXCAR_OP_OUTBOX_DEAD R"sql(
    ORDER BY r.updated_at, r.id
    LIMIT $7
    FOR NO KEY UPDATE OF r SKIP LOCKED
)
UPDATE {schema}.outbox_events AS r
SET status = 'PENDING',
    attempts = 0,
    available_at = now(),
    dead_reason = NULL,
    replay_count = r.replay_count + 1,
    last_replayed_at = now(),
    last_replayed_by = $8::text,
    updated_at = now()
FROM matching
WHERE r.id = matching.id
RETURNING r.id
)sql";

// The row stays DEAD (so its identity keeps deduplicating redeliveries); only the
// discard is recorded.
inline constexpr const char* kInboxDiscard = R"sql(
WITH matching AS (
    SELECT r.id
)sql" BOXCAR_OP_INBOX_DEAD R"sql(
    ORDER BY r.updated_at, r.id
    LIMIT $7
    FOR NO KEY UPDATE OF r SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET discarded_at = now(),
    discarded_by = $8::text,
    updated_at = now()
FROM matching
WHERE r.id = matching.id
RETURNING r.id
)sql";

inline constexpr const char* kOutboxDiscard = R"sql(
WITH matching AS (
    SELECT r.id
)sql" BOXCAR_OP_OUTBOX_DEAD R"sql(
    ORDER BY r.updated_at, r.id
    LIMIT $7
    FOR NO KEY UPDATE OF r SKIP LOCKED
)
UPDATE {schema}.outbox_events AS r
SET discarded_at = now(),
    discarded_by = $8::text,
    updated_at = now()
FROM matching
WHERE r.id = matching.id
RETURNING r.id
)sql";

// Dry runs of retry/discard: the ids the statements above would take now.
inline constexpr const char* kInboxMatching = R"sql(
SELECT r.id
)sql" BOXCAR_OP_INBOX_DEAD R"sql(
ORDER BY r.updated_at, r.id
LIMIT $7
)sql";

inline constexpr const char* kOutboxMatching = R"sql(
SELECT r.id
)sql" BOXCAR_OP_OUTBOX_DEAD R"sql(
ORDER BY r.updated_at, r.id
LIMIT $7
)sql";

// Best-effort wake-up of idle workers / publishers after a retry ($1 = channel).
inline constexpr const char* kNotify = R"sql(
SELECT pg_notify($1, '')
)sql";

// ---------------------------------------------------------------------------------------
// purge: one bounded batch per statement, oldest first through the partial retention
// indexes. SKIP LOCKED: a row someone holds is left for the next run rather than waited
// for. $1 retention in seconds, $2 batch size.

inline constexpr const char* kPurgeInbox = R"sql(
DELETE FROM {schema}.inbox_receipts
WHERE id IN (
    SELECT id
    FROM {schema}.inbox_receipts
    WHERE status = 'COMPLETED'
      AND completed_at < now() - make_interval(secs => $1::double precision)
    ORDER BY completed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
)sql";

inline constexpr const char* kPurgeOutbox = R"sql(
DELETE FROM {schema}.outbox_events
WHERE id IN (
    SELECT id
    FROM {schema}.outbox_events
    WHERE status = 'PUBLISHED'
      AND published_at < now() - make_interval(secs => $1::double precision)
    ORDER BY published_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
)sql";

inline constexpr const char* kPurgeInboxCount = R"sql(
SELECT count(*)
FROM {schema}.inbox_receipts
WHERE status = 'COMPLETED'
  AND completed_at < now() - make_interval(secs => $1::double precision)
)sql";

inline constexpr const char* kPurgeOutboxCount = R"sql(
SELECT count(*)
FROM {schema}.outbox_events
WHERE status = 'PUBLISHED'
  AND published_at < now() - make_interval(secs => $1::double precision)
)sql";

#undef BOXCAR_OP_INBOX_COLUMNS
#undef BOXCAR_OP_OUTBOX_COLUMNS
#undef BOXCAR_OP_INBOX_DEAD
#undef BOXCAR_OP_OUTBOX_DEAD
#undef BOXCAR_OP_MICROS
#undef BOXCAR_OP_FAILURE

}  // namespace boxcar::operator_sql
