-- boxcar:compatible-with 16
-- boxcar:previous-checksum fe3ff5d46fb814e7492c13d6947b874ee5af6d1a05aa8fd50377d01ecd503040
-- (this file before its comments were reworded: the same statements)
-- Covering indexes for the outbox's backlog figures, step 1 of 3 (docs/schema.md, "Outbox
-- indexes"). The backlog collector counts the due events by status with their oldest
-- created_at, and the events in flight with theirs; through outbox_events_due and
-- outbox_events_leases that is one heap fetch per event, and a backlog that landed among
-- retained rows (in the free space churn leaves) reads about twice the pages it would on
-- an empty table (docs/benchmarks.md, "Covering indexes for the backlog counts"). The same
-- keys and predicates with the columns those figures read INCLUDEd make both index-only
-- scans; they serve the publisher's claim and lease recovery as the old indexes did, and
-- replace them (0025).
--
-- A partitioned table cannot build an index CONCURRENTLY, and a plain CREATE INDEX on it
-- would hold writers off every partition for the whole build. So, as PostgreSQL documents
-- for partitioned indexes: here the parent indexes are made ON ONLY the partitioned table
-- (INVALID, nothing built, a catalog instant), 0024 builds each partition's index
-- concurrently, and 0025 attaches them, which makes the parents valid, then drops the old
-- indexes. Partitions attached from now on (the janitor's outbox_create_partitions, below,
-- or any ATTACH, which builds a missing index while the table is empty) get theirs at once,
-- and so, at the end of this file, do the partitions that are empty now (the days ahead,
-- every partition of a new installation): their build reads nothing, so it holds their
-- writers off for an instant, like 0019's ATTACH, and 0024 has only the others to build.
-- A partition whose DETACH ... CONCURRENTLY was interrupted (pg_inherits.inhdetachpending,
-- on its way out: the janitor finalizes it) is no partition to an index: PostgreSQL
-- refuses to attach its index and validates the parents without it, so all three steps
-- pass it over.

-- The covering indexes: the name of each (the parent's less its _all suffix, a partition's
-- less its own suffix), and their definition after the table name: one place for this file's
-- parents, outbox_create_partitions and 0024.
CREATE FUNCTION outbox_covering_indexes()
    RETURNS TABLE (base text, definition text)
    LANGUAGE sql
    IMMUTABLE
AS $fn$
    VALUES ('outbox_events_due_covering',
            '(available_at, id) INCLUDE (status, created_at) WHERE status IN (''PENDING'', ''RETRYABLE'')'),
           ('outbox_events_leases_covering',
            '(lease_expires_at) INCLUDE (created_at) WHERE status = ''PUBLISHING''')
$fn$;

-- The name of the index `base` on the partition `part` of outbox_events: base followed by
-- the partition's own suffix (outbox_events_p20261203 -> base_p20261203, the first
-- partition outbox_events_legacy -> base_legacy), or by its oid for a partition named
-- otherwise, so the name is always a lower-case identifier of at most 63 bytes.
CREATE FUNCTION outbox_partition_index_name(part regclass, base text)
    RETURNS text
    LANGUAGE sql
    STABLE
AS $fn$
    SELECT base || CASE
                       WHEN c.relname ~ '^outbox_events_[a-z0-9_]{1,20}$'
                           THEN pg_catalog.substr(c.relname, pg_catalog.length('outbox_events') + 1)
                       ELSE '_' || c.oid::text
                   END
    FROM pg_catalog.pg_class AS c
    WHERE c.oid = part
$fn$;

-- As in 0017, with the covering indexes in place of outbox_events_due and
-- outbox_events_leases.
CREATE OR REPLACE FUNCTION outbox_create_partitions(parent regclass, days_ahead integer)
    RETURNS integer
    LANGUAGE plpgsql
    SECURITY INVOKER
AS $fn$
DECLARE
    upper_bound uuid;
    day_start timestamptz;
    day_end timestamptz;
    horizon timestamptz;
    suffix text;
    part text;
    schema_name text;
    covering record;
    created integer := 0;
BEGIN
    IF days_ahead < 1 THEN
        RAISE EXCEPTION 'outbox_create_partitions: days_ahead must be at least 1, not %', days_ahead;
    END IF;
    SELECT n.nspname
    INTO schema_name
    FROM pg_catalog.pg_class AS c
    JOIN pg_catalog.pg_namespace AS n
      ON n.oid = c.relnamespace
    WHERE c.oid = parent;
    horizon := pg_catalog.date_trunc('day', pg_catalog.now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC'
               + pg_catalog.make_interval(days => days_ahead + 1);
    -- The newest partition's upper bound; a table without partitions starts today.
    SELECT pg_catalog.substring(pg_catalog.pg_get_expr(c.relpartbound, c.oid), 'TO \(''([0-9a-f-]+)''\)')::uuid
    INTO upper_bound
    FROM pg_catalog.pg_inherits AS i
    JOIN pg_catalog.pg_class AS c
      ON c.oid = i.inhrelid
    WHERE i.inhparent = parent
    ORDER BY 1 DESC
    LIMIT 1;
    IF upper_bound IS NULL THEN
        day_start := pg_catalog.date_trunc('day', pg_catalog.now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC';
    ELSE
        day_start := outbox_event_id_time(upper_bound);
    END IF;
    WHILE day_start < horizon LOOP
        day_end := day_start + '1 day'::interval;
        suffix := '_p' || pg_catalog.to_char(day_start AT TIME ZONE 'UTC', 'YYYYMMDD');
        part := 'outbox_events' || suffix;
        EXECUTE pg_catalog.format(
            'CREATE TABLE %I.%I (LIKE %s INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING STORAGE)'
            ' WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_threshold = 1000,'
            ' autovacuum_analyze_scale_factor = 0.02)', schema_name, part, parent);
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %I.%I (id)', 'outbox_events_id' || suffix, schema_name, part);
        EXECUTE pg_catalog.format('ALTER TABLE %I.%I ADD CONSTRAINT %I UNIQUE (event_id)',
                                  schema_name, part, 'outbox_events_event_id' || suffix);
        FOR covering IN SELECT x.base, x.definition FROM outbox_covering_indexes() AS x LOOP
            EXECUTE pg_catalog.format('CREATE INDEX %I ON %I.%I %s', covering.base || suffix, schema_name, part,
                                      covering.definition);
        END LOOP;
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %I.%I (updated_at) WHERE status = ''DEAD''',
                                  'outbox_events_dead' || suffix, schema_name, part);
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %I.%I (published_at) WHERE status = ''PUBLISHED''',
                                  'outbox_events_published' || suffix, schema_name, part);
        EXECUTE pg_catalog.format(
            'CREATE INDEX %I ON %I.%I (topic, message_key, key_seq) WHERE status = ''WAITING''',
            'outbox_events_waiting' || suffix, schema_name, part);
        -- Until 0025 drops them, the old parent indexes get their copies built here, on the
        -- empty table.
        EXECUTE pg_catalog.format('ALTER TABLE %s ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
                                  parent, schema_name, part, outbox_event_id_floor(day_start), outbox_event_id_floor(day_end));
        created := created + 1;
        day_start := day_end;
    END LOOP;
    RETURN created;
END
$fn$;

-- The parent indexes, ON ONLY outbox_events (outbox_events_due_covering_all, ...), then the
-- indexes of the partitions with no page yet (pg_relation_size is the size of the table's
-- file, not an estimate), attached. A row that an emitter adds after the check is indexed
-- with the rest: the build scans whatever the table holds under its SHARE lock. The parent
-- and its partitions are locked first, in the order every emit and claim takes them in, so
-- the partitions' builds cannot deadlock with an emit that holds the parent. Emitters and
-- publishers wait for this transaction, which builds on empty tables only.
LOCK TABLE outbox_events IN SHARE MODE;

DO $do$
DECLARE
    p record;
    covering record;
BEGIN
    FOR covering IN SELECT x.base, x.definition FROM outbox_covering_indexes() AS x LOOP
        EXECUTE pg_catalog.format('CREATE INDEX %I ON ONLY outbox_events %s', covering.base || '_all',
                                  covering.definition);
        FOR p IN
            SELECT c.oid, c.relname
            FROM pg_catalog.pg_inherits AS i
            JOIN pg_catalog.pg_class AS c
              ON c.oid = i.inhrelid
            WHERE i.inhparent = 'outbox_events'::regclass
              AND NOT i.inhdetachpending
              AND pg_catalog.pg_relation_size(c.oid) = 0
            ORDER BY c.relname
        LOOP
            EXECUTE pg_catalog.format('CREATE INDEX %I ON %I %s', outbox_partition_index_name(p.oid, covering.base),
                                      p.relname, covering.definition);
            EXECUTE pg_catalog.format('ALTER INDEX %I ATTACH PARTITION %I', covering.base || '_all',
                                      outbox_partition_index_name(p.oid, covering.base));
        END LOOP;
    END LOOP;
END
$do$;

-- CREATE OR REPLACE resets a function's settings: pin search_path again as 0017 did.
SELECT pg_catalog.set_config('search_path',
    'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION outbox_create_partitions(regclass, integer) SET search_path FROM CURRENT;
ALTER FUNCTION outbox_partition_index_name(regclass, text) SET search_path FROM CURRENT;
ALTER FUNCTION outbox_covering_indexes() SET search_path FROM CURRENT;
