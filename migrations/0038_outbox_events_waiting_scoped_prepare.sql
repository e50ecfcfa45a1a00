-- boxcar:compatible-with 37
-- Outbox keys are scoped, step 2 of 4: the index the scoped promotions read (0037),
-- (topic, tenant_scope, tenant_id, message_key, key_seq) WHERE status = 'WAITING', made the
-- way 0023 made the covering indexes. It joins the list of indexes every partition gets by
-- those steps (outbox_covering_indexes): outbox_create_partitions builds each entry on a
-- new partition, 0039 on the partitions that lack one, 0040 attaches them. Here the parent
-- index is made ON ONLY the partitioned table (INVALID, nothing built) and built on the
-- partitions with no page yet, whose builds read nothing. A separate transaction from
-- 0037's: this one locks outbox_events (SHARE, for the catalog changes and the empty
-- builds) before anything else, the order every emit takes its locks in. No statement
-- names an index: compatible with 37.

LOCK TABLE outbox_events IN SHARE MODE;

-- The list of 0023, with the scoped waiting index.
CREATE OR REPLACE FUNCTION outbox_covering_indexes()
    RETURNS TABLE (base text, definition text)
    LANGUAGE sql
    IMMUTABLE
AS $fn$
    VALUES ('outbox_events_due_covering',
            '(available_at, id) INCLUDE (status, created_at) WHERE status IN (''PENDING'', ''RETRYABLE'')'),
           ('outbox_events_leases_covering',
            '(lease_expires_at) INCLUDE (created_at) WHERE status = ''PUBLISHING'''),
           ('outbox_events_waiting_scoped',
            '(topic, tenant_scope, tenant_id, message_key, key_seq) WHERE status = ''WAITING''')
$fn$;

-- As in 0023, without the unscoped waiting index (ATTACH gives a new partition a copy of
-- it until 0040 drops it).
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
        EXECUTE pg_catalog.format('ALTER TABLE %s ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
                                  parent, schema_name, part, outbox_event_id_floor(day_start), outbox_event_id_floor(day_end));
        created := created + 1;
        day_start := day_end;
    END LOOP;
    RETURN created;
END
$fn$;

-- The scoped waiting index ON ONLY the parent, and on the partitions with no page yet,
-- attached.
CREATE INDEX outbox_events_waiting_scoped_all
    ON ONLY outbox_events (topic, tenant_scope, tenant_id, message_key, key_seq)
    WHERE status = 'WAITING';

DO $do$
DECLARE
    p record;
BEGIN
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
        EXECUTE pg_catalog.format(
            'CREATE INDEX %I ON %I (topic, tenant_scope, tenant_id, message_key, key_seq) WHERE status = ''WAITING''',
            outbox_partition_index_name(p.oid, 'outbox_events_waiting_scoped'), p.relname);
        EXECUTE pg_catalog.format('ALTER INDEX outbox_events_waiting_scoped_all ATTACH PARTITION %I',
                                  outbox_partition_index_name(p.oid, 'outbox_events_waiting_scoped'));
    END LOOP;
END
$do$;

-- CREATE OR REPLACE resets a function's settings: pin search_path again as 0023 did.
SELECT pg_catalog.set_config('search_path',
    'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION outbox_covering_indexes() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_create_partitions(regclass, integer) SET search_path FROM CURRENT;
