// The test helpers' SQL. `{schema}` is replaced per call; values are $n. The template
// database's DDL (CREATE / ALTER / DROP DATABASE) takes no parameters: its identifiers
// are quoted into the text where it runs (template_database.cpp).
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

// The server's UTC day (the migrations create the outbox's partitions from it) and the
// state of the template database of that day: NULL when there is none, false while its
// creator has not finished (or died: nothing else makes one), true once it can be copied.
// $1 is the name without the day.
inline constexpr const char* kTemplateState = R"sql(
SELECT d.day, t.datistemplate AS ready
FROM (SELECT pg_catalog.to_char(pg_catalog.now() AT TIME ZONE 'UTC', 'YYYYMMDD') AS day) AS d
LEFT JOIN pg_catalog.pg_database AS t
       ON t.datname = pg_catalog.concat($1::text, d.day)
)sql";

// Serialises the making of a template among the test processes of one server, in the
// URL's database; a session lock, as CREATE DATABASE cannot run in a transaction. Held
// for one migration (well under a second); released when its session ends.
inline constexpr const char* kLockTemplate = R"sql(
SELECT pg_catalog.pg_advisory_lock(pg_catalog.hashtext('boxcar.testing.template_database'))
)sql";

// Every template database of this kit, with its day; $1 is the prefix before the checksum.
inline constexpr const char* kTemplates = R"sql(
SELECT datname, pg_catalog.right(datname, 8) AS day
FROM pg_catalog.pg_database
WHERE pg_catalog.starts_with(datname, $1::text)
)sql";

// A copy of the template becomes the test's schema: renamed, and each function that pins
// its search_path to the schema (the migrations' SET search_path FROM CURRENT) pinned to
// the new name the same way, so the catalog reads as a migration under the new name
// leaves it (tests/pg/test_schema_test.cpp compares the two). {from} and {to} are the old
// and new names as quoted literals; DO takes no parameters.
inline constexpr const char* kRenameTemplateSchema = R"sql(
DO $rename$
DECLARE
    f record;
BEGIN
    EXECUTE pg_catalog.format('ALTER SCHEMA %I RENAME TO %I', {from}, {to});
    FOR f IN
        SELECT p.oid::pg_catalog.regprocedure AS signature,
               pg_catalog.array_to_string(ARRAY(
                   SELECT CASE WHEN e.part = pg_catalog.quote_ident({from})
                               THEN pg_catalog.quote_ident({to})
                               ELSE e.part END
                   FROM pg_catalog.unnest(pg_catalog.string_to_array(
                            pg_catalog.substr(c.setting, pg_catalog.length('search_path=') + 1), ', '))
                        WITH ORDINALITY AS e(part, n)
                   ORDER BY e.n), ', ') AS search_path
        FROM pg_catalog.pg_proc AS p
        CROSS JOIN LATERAL pg_catalog.unnest(p.proconfig) AS c(setting)
        WHERE p.pronamespace = (SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = {to})
          AND pg_catalog.starts_with(c.setting, 'search_path=')
    LOOP
        PERFORM pg_catalog.set_config('search_path', f.search_path, true);
        EXECUTE pg_catalog.format('ALTER FUNCTION %s SET search_path FROM CURRENT', f.signature);
    END LOOP;
END
$rename$
)sql";

}  // namespace boxcar::testing_sql
