-- boxcar:compatible-with 37
-- Outbox keys are scoped, step 4 of 4: each partition's scoped waiting index built by 0039
-- is attached to its parent (catalog only), which makes the parent valid; then the
-- unscoped waiting index of 0017, which no statement reads any more, is dropped with every
-- partition's copy: one ACCESS EXCLUSIVE instant on outbox_events and its partitions (no
-- scan, no build), bounded by the runner's lock_timeout and retried, the lock taken first,
-- parent before partitions, as 0025 does.
LOCK TABLE outbox_events IN ACCESS EXCLUSIVE MODE;

DO $do$
DECLARE
    p record;
    parent text;
BEGIN
    FOR parent IN SELECT x.base FROM outbox_covering_indexes() AS x LOOP
        FOR p IN
            SELECT c.oid
            FROM pg_catalog.pg_inherits AS i
            JOIN pg_catalog.pg_class AS c
              ON c.oid = i.inhrelid
            WHERE i.inhparent = 'outbox_events'::regclass
              AND NOT i.inhdetachpending
              AND NOT EXISTS (SELECT 1
                              FROM pg_catalog.pg_index AS pi
                              JOIN pg_catalog.pg_inherits AS ii
                                ON ii.inhrelid = pi.indexrelid
                              WHERE pi.indrelid = c.oid
                                AND ii.inhparent = (parent || '_all')::regclass)
            ORDER BY c.relname
        LOOP
            EXECUTE pg_catalog.format('ALTER INDEX %I ATTACH PARTITION %I',
                                      parent || '_all', outbox_partition_index_name(p.oid, parent));
        END LOOP;
        IF NOT (SELECT x.indisvalid FROM pg_catalog.pg_index AS x WHERE x.indexrelid = (parent || '_all')::regclass) THEN
            RAISE EXCEPTION '%_all is not valid after attaching every partition''s index', parent;
        END IF;
    END LOOP;
END
$do$;

DROP INDEX outbox_events_waiting_all;
