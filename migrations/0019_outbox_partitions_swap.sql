-- boxcar:compatible-with 16
-- Outbox time partitions, step 3 of 3 (0017 prepared the partitioned table, 0018 the index
-- it expects). One transaction:
--   1. VALIDATE the NOT VALID checks of today's table (its partition bound from 0017, and
--      0013's status and WAITING checks, which the partitioned table's copies require
--      valid): a scan under SHARE UPDATE EXCLUSIVE, beside emitters and publishers;
--   2. one ACCESS EXCLUSIVE instant (bounded by the runner's lock_timeout and retried):
--      today's table becomes outbox_events_legacy, the partitioned table becomes
--      outbox_events and takes it as its first partition FROM (MINVALUE) TO (its bound).
--      ATTACH skips the scan (the validated check implies the partition constraint) and
--      builds no index (0017 and 0018 made every index it expects). The key-order
--      triggers, the outbox_dead_records view and the grants move to the new table; the
--      identity sequence continues past today's ids; daily partitions are created ahead.
-- Statements prepared by running sessions are planned again against the new table (the
-- rename invalidates them; they name the table, not its oid).
ALTER TABLE outbox_events
    VALIDATE CONSTRAINT outbox_events_legacy_bound,
    VALIDATE CONSTRAINT outbox_events_status,
    VALIDATE CONSTRAINT outbox_events_waiting_position;

LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE;

DROP TRIGGER outbox_events_key_order_enter ON outbox_events;
DROP TRIGGER outbox_events_key_order_reenter ON outbox_events;
DROP TRIGGER outbox_events_key_order_leave ON outbox_events;
DROP TRIGGER outbox_events_key_order_delete ON outbox_events;
DROP TRIGGER outbox_events_key_order_truncate ON outbox_events;
-- Its unique id index; outbox_events_id (0018) serves the same lookups as a partition's.
ALTER TABLE outbox_events DROP CONSTRAINT outbox_events_pkey;

ALTER TABLE outbox_events RENAME TO outbox_events_legacy;
ALTER SEQUENCE outbox_events_id_seq RENAME TO outbox_events_legacy_id_seq;
ALTER TABLE outbox_events_partitioned RENAME TO outbox_events;
ALTER SEQUENCE outbox_events_partitioned_id_seq RENAME TO outbox_events_id_seq;

DO $do$
DECLARE
    legacy_owner oid;
    bound text;
    g record;
BEGIN
    -- Ids continue where today's table stopped.
    PERFORM pg_catalog.setval('outbox_events_id_seq'::regclass,
        GREATEST(pg_catalog.pg_sequence_last_value('outbox_events_legacy_id_seq'::regclass), 1::bigint),
        pg_catalog.pg_sequence_last_value('outbox_events_legacy_id_seq'::regclass) IS NOT NULL);

    SELECT c.relowner INTO legacy_owner FROM pg_catalog.pg_class AS c WHERE c.oid = 'outbox_events_legacy'::regclass;
    IF legacy_owner <> (SELECT c.relowner FROM pg_catalog.pg_class AS c WHERE c.oid = 'outbox_events'::regclass) THEN
        EXECUTE pg_catalog.format('ALTER TABLE outbox_events OWNER TO %I',
                                  (SELECT r.rolname FROM pg_catalog.pg_roles AS r WHERE r.oid = legacy_owner));
    END IF;

    SELECT pg_catalog.substring(pg_catalog.pg_get_constraintdef(k.oid), '''([0-9a-f-]+)''')
    INTO bound
    FROM pg_catalog.pg_constraint AS k
    WHERE k.conrelid = 'outbox_events_legacy'::regclass
      AND k.conname = 'outbox_events_legacy_bound';
    EXECUTE pg_catalog.format(
        'ALTER TABLE outbox_events ATTACH PARTITION outbox_events_legacy FOR VALUES FROM (MINVALUE) TO (%L)', bound);

    -- The runtime roles' grants (apply_roles, core/src/roles_queries.hpp), table and column
    -- privileges alike, as they were on today's table.
    FOR g IN
        SELECT a.privilege_type, a.grantee, a.is_grantable
        FROM pg_catalog.pg_class AS c, pg_catalog.aclexplode(c.relacl) AS a
        WHERE c.oid = 'outbox_events_legacy'::regclass
          AND a.grantee <> c.relowner
    LOOP
        EXECUTE pg_catalog.format('GRANT %s ON TABLE outbox_events TO %s%s', g.privilege_type,
            CASE WHEN g.grantee = 0::oid THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident((SELECT r.rolname FROM pg_catalog.pg_roles AS r WHERE r.oid = g.grantee)) END,
            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
    FOR g IN
        SELECT t.attname, a.privilege_type, a.grantee, a.is_grantable
        FROM pg_catalog.pg_attribute AS t, pg_catalog.aclexplode(t.attacl) AS a
        WHERE t.attrelid = 'outbox_events_legacy'::regclass
          AND t.attacl IS NOT NULL
          AND NOT t.attisdropped
    LOOP
        EXECUTE pg_catalog.format('GRANT %s (%I) ON TABLE outbox_events TO %s%s', g.privilege_type, g.attname,
            CASE WHEN g.grantee = 0::oid THEN 'PUBLIC'
                 ELSE pg_catalog.quote_ident((SELECT r.rolname FROM pg_catalog.pg_roles AS r WHERE r.oid = g.grantee)) END,
            CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
    END LOOP;
END
$do$;

-- The key-order triggers of 0013, now on the partitioned table: row triggers are cloned
-- onto every partition, present and future; the statement trigger and its transition
-- tables see the rows of every partition an UPDATE touches.
CREATE TRIGGER outbox_events_key_order_enter
    BEFORE INSERT ON outbox_events
    FOR EACH ROW
    WHEN (NEW.ordered AND NEW.status = 'PENDING')
    EXECUTE FUNCTION outbox_key_order_enter();

CREATE TRIGGER outbox_events_key_order_reenter
    BEFORE UPDATE OF status ON outbox_events
    FOR EACH ROW
    WHEN (OLD.key_seq IS NOT NULL
          AND OLD.status IN ('PUBLISHED', 'DEAD')
          AND NEW.status IN ('PENDING', 'RETRYABLE'))
    EXECUTE FUNCTION outbox_key_order_enter();

CREATE TRIGGER outbox_events_key_order_leave
    AFTER UPDATE ON outbox_events
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_key_order_leave_all();

CREATE TRIGGER outbox_events_key_order_delete
    AFTER DELETE ON outbox_events
    FOR EACH ROW
    WHEN (OLD.key_seq IS NOT NULL
          AND OLD.status IN ('PENDING', 'WAITING', 'PUBLISHING', 'RETRYABLE'))
    EXECUTE FUNCTION outbox_key_order_leave();

CREATE TRIGGER outbox_events_key_order_truncate
    AFTER TRUNCATE ON outbox_events
    FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_key_order_truncate();

-- 0004's view, now over the partitioned table (a view follows the table it was made on,
-- which the rename made the legacy partition).
CREATE OR REPLACE VIEW outbox_dead_records AS
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

-- Seven whole UTC days ahead; the janitor keeps it so (docs/operations.md, "Janitor").
SELECT outbox_create_partitions('outbox_events'::regclass, 7);
