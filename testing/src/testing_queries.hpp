// The test helpers' SQL. `{schema}` is replaced per call; values are $n.
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
#pragma once

namespace boxcar::testing_sql {

inline constexpr const char* kReceiptState = R"sql(
SELECT status, attempts, finished_attempts, last_error_type, last_error, dead_reason
FROM {schema}.inbox_receipts
WHERE consumer = $1
  AND source = $2
  AND scope_kind = $3
  AND scope_id = $4
  AND message_id = $5
)sql";

// A publisher that delivers to the test: every committed, due event. An ordered event
// WAITING behind its key's head becomes PENDING when the head is marked here (the trigger
// of 0013_outbox_key_order.sql): capture_published() runs this until it returns nothing.
inline constexpr const char* kCapturePublished = R"sql(
WITH due AS (
    SELECT id
    FROM {schema}.outbox_events
    WHERE status IN ('PENDING', 'RETRYABLE')
    ORDER BY id
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.outbox_events AS e
SET status = 'PUBLISHED',
    published_at = pg_catalog.now(),
    attempts = e.attempts + 1,
    updated_at = pg_catalog.now()
FROM due
WHERE e.id = due.id
RETURNING e.event_id::text, e.event_type, e.schema_version, e.topic, e.message_key, e.tenant_id,
          e.causation_id, e.correlation_id, e.payload, e.headers::text, e.id
)sql";

}  // namespace boxcar::testing_sql
