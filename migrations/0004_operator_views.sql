-- The operator's view of DEAD records: the failure fingerprint as a function and one view
-- per table, so `boxcar dead ...` statements (ops/src/operator_queries.hpp) and
-- an operator in psql read the same named columns. See docs/schema.md and docs/operator.md.
--
-- Built-ins are called as pg_catalog.<name> and the function pins its search_path: a
-- function planted in a schema on the caller's search_path (public) can never stand in
-- for them.

-- "<error_type>: <error_message>" with UUIDs, 0x-hex, long mixed hex ids (at least 6 hex
-- digits with a letter and a digit, so words such as "deadline" or "cafe" survive) and then
-- digit runs masked, in that order: masking digits first would break the UUIDs and hex ids
-- apart. Two failures that differ only in an order number or a request id share a
-- fingerprint. '\m' and '\M' are PostgreSQL's word boundaries.
CREATE FUNCTION failure_fingerprint(error_type text, error_message text)
    RETURNS text
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
RETURN coalesce(error_type, '') || ': ' ||
    pg_catalog.regexp_replace(
        pg_catalog.regexp_replace(
            pg_catalog.regexp_replace(
                pg_catalog.regexp_replace(
                    coalesce(error_message, ''),
                    '[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}',
                    '<uuid>', 'gi'),
                '\m0x[0-9a-f]+\M', '<hex>', 'gi'),
            '\m(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{6,}\M', '<hex>', 'gi'),
        '[0-9]+', '<n>', 'g');

-- Every DEAD receipt, discarded or not (discarded_at says which). failure_group, the first
-- 12 hex digits of md5(failure), is the key `dead groups` prints and `--group` takes.
-- A simple view over one table: statements can lock its rows (FOR NO KEY UPDATE), and the
-- status filter lets the planner use inbox_receipts_dead.
CREATE VIEW inbox_dead_records AS
SELECT r.id,
       r.scope_kind,
       r.scope_id,
       r.source,
       r.consumer,
       r.message_id,
       r.event_type,
       r.schema_version,
       r.attempts,
       r.dead_reason,
       r.last_error_type,
       r.last_error,
       failure_fingerprint(r.last_error_type, r.last_error) AS failure,
       pg_catalog.left(pg_catalog.md5(failure_fingerprint(r.last_error_type, r.last_error)), 12)
           AS failure_group,
       r.fingerprint,
       r.payload,
       r.metadata,
       r.created_at,
       r.updated_at,
       r.replay_count,
       r.last_replayed_at,
       r.last_replayed_by,
       r.discarded_at,
       r.discarded_by
FROM inbox_receipts AS r
WHERE r.status = 'DEAD';

-- Every DEAD outbox event, discarded or not. Events record no error type: the dead reason
-- stands in for it in the fingerprint.
CREATE VIEW outbox_dead_records AS
SELECT e.id,
       e.tenant_scope,
       e.tenant_id,
       e.event_id,
       e.topic,
       e.message_key,
       e.event_type,
       e.schema_version,
       e.attempts,
       e.dead_reason,
       e.last_error,
       failure_fingerprint(e.dead_reason, e.last_error) AS failure,
       pg_catalog.left(pg_catalog.md5(failure_fingerprint(e.dead_reason, e.last_error)), 12)
           AS failure_group,
       e.payload,
       e.headers,
       e.causation_id,
       e.correlation_id,
       e.traceparent,
       e.created_at,
       e.updated_at,
       e.replay_count,
       e.last_replayed_at,
       e.last_replayed_by,
       e.discarded_at,
       e.discarded_by
FROM outbox_events AS e
WHERE e.status = 'DEAD';
