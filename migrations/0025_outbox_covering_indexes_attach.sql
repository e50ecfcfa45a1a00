-- boxcar:compatible-with 16
-- Covering indexes for the outbox's backlog figures, step 3 of 3. Each partition's index
-- built by 0024 is attached to its parent (catalog only), which makes the parent valid once
-- every partition has one; then the indexes they replace are dropped: one ACCESS EXCLUSIVE
-- instant on outbox_events and its partitions (no scan, no build), bounded by the runner's
-- lock_timeout and retried like 0019's. The lock is taken first, on the parent before its
-- partitions, the order every emit and claim takes them in: attaching a partition's index
-- locks that partition, and a DROP asking for the parent after it would deadlock with an
-- emit that holds the parent and waits for the partition.
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

DROP INDEX outbox_events_due_all;
DROP INDEX outbox_events_leases_all;
