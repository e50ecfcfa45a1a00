-- boxcar:compatible-with 16
-- Outbox time partitions, step 1 of 3 (docs/schema.md, "Outbox partitions"). outbox_events
-- becomes a table partitioned by RANGE (event_id): event ids are UUIDv7, whose first 48
-- bits are the emit's Unix milliseconds, so a range of ids is a range of emit time, and
-- UNIQUE (event_id) stays one real constraint over every partition (a unique constraint
-- must contain the partition key). Old partitions are then retired whole (DETACH
-- PARTITION CONCURRENTLY, DROP) instead of row by row: no dead tuples, no vacuum debt.
--
-- Online: nothing here rewrites or scans outbox_events. This step creates the empty
-- partitioned table (outbox_events_partitioned) with daily partitions ahead, and puts on
-- today's table a NOT VALID check that its event ids stay below the first daily bound
-- (one short ACCESS EXCLUSIVE instant; existing rows are not checked). Step 3 (0019)
-- validates it (SHARE UPDATE EXCLUSIVE: emitters and publishers go on) and attaches
-- today's table as the first partition, FROM (MINVALUE) TO (that bound), without a scan.
-- A binary that knows only 0016 keeps working throughout: it never sees the new table,
-- and after 0019 it inserts and claims through the same name.

-- The smallest UUIDv7 of the millisecond `at` falls in: the bound of a partition that
-- starts at `at`. UUIDv7 = 48 bits of Unix milliseconds, then version, counter, random.
CREATE FUNCTION outbox_event_id_floor(at timestamptz)
    RETURNS uuid
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
AS $fn$
    SELECT (pg_catalog.substr(h, 1, 8) || '-' || pg_catalog.substr(h, 9, 4) || '-0000-0000-000000000000')::uuid
    FROM (SELECT pg_catalog.lpad(pg_catalog.to_hex(
              pg_catalog.floor(pg_catalog.date_part('epoch', at) * 1000::double precision)::bigint), 12, '0') AS h) AS ms
$fn$;

-- The emit time (to the millisecond) that a UUIDv7 carries.
CREATE FUNCTION outbox_event_id_time(event_id uuid)
    RETURNS timestamptz
    LANGUAGE sql
    IMMUTABLE
    PARALLEL SAFE
    SET search_path = pg_catalog, pg_temp
RETURN pg_catalog.to_timestamp(
    ((('x' || pg_catalog.lpad(pg_catalog.replace(pg_catalog.left(event_id::text, 13), '-', ''), 16, '0'))::bit(64))::bigint)::double precision
    / 1000::double precision);

-- The partitioned table: the same columns in the same order (LIKE), its defaults and
-- identity (a fresh sequence, set past today's ids by 0019) and its CHECK constraints by
-- name, so today's table can be attached as a partition. The indexes are created here, on
-- the empty table, under names ending in _all; each partition's own indexes end in
-- _p<YYYYMMDD>, and today's table keeps its names (outbox_events_due, ...), so a plan reads
-- the same whichever partition it visits.
CREATE TABLE outbox_events_partitioned (
    LIKE outbox_events INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS INCLUDING STORAGE
) PARTITION BY RANGE (event_id);

-- The primary key (id) cannot stay unique over partitions keyed by event_id; id still comes
-- from one identity sequence, so it stays unique in fact, and every lookup by id (the
-- publisher's marks, operators' statements, the key-order promotion) is an index scan of
-- this index in each partition.
CREATE INDEX outbox_events_id_all ON outbox_events_partitioned (id);
ALTER TABLE outbox_events_partitioned
    ADD CONSTRAINT outbox_events_event_id_all UNIQUE (event_id);
CREATE INDEX outbox_events_due_all
    ON outbox_events_partitioned (available_at, id)
    WHERE status IN ('PENDING', 'RETRYABLE');
CREATE INDEX outbox_events_leases_all
    ON outbox_events_partitioned (lease_expires_at)
    WHERE status = 'PUBLISHING';
CREATE INDEX outbox_events_dead_all
    ON outbox_events_partitioned (updated_at)
    WHERE status = 'DEAD';
CREATE INDEX outbox_events_published_all
    ON outbox_events_partitioned (published_at)
    WHERE status = 'PUBLISHED';
CREATE INDEX outbox_events_waiting_all
    ON outbox_events_partitioned (topic, message_key, key_seq)
    WHERE status = 'WAITING';

-- Creates the daily partitions, from the end of the newest one, until the partitions
-- cover `days_ahead` whole UTC days after today; returns how many it created. Each is a
-- plain table (its indexes built while it is empty) then ATTACHed: ATTACH takes SHARE
-- UPDATE EXCLUSIVE on the parent, so emitters and publishers go on, where CREATE TABLE ...
-- PARTITION OF would take ACCESS EXCLUSIVE. Run by migration 0019, the janitor
-- and `boxcar purge`, as the tables' owner. There is no DEFAULT partition: it would forbid
-- DETACH ... CONCURRENTLY, and an emit past the last partition fails instead
-- (OutboxPartitionMissingError), losing nothing.
CREATE FUNCTION outbox_create_partitions(parent regclass, days_ahead integer)
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
        EXECUTE pg_catalog.format(
            'CREATE INDEX %I ON %I.%I (available_at, id) WHERE status IN (''PENDING'', ''RETRYABLE'')',
            'outbox_events_due' || suffix, schema_name, part);
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %I.%I (lease_expires_at) WHERE status = ''PUBLISHING''',
                                  'outbox_events_leases' || suffix, schema_name, part);
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %I.%I (updated_at) WHERE status = ''DEAD''',
                                  'outbox_events_dead' || suffix, schema_name, part);
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %I.%I (published_at) WHERE status = ''PUBLISHED''',
                                  'outbox_events_published' || suffix, schema_name, part);
        EXECUTE pg_catalog.format(
            'CREATE INDEX %I ON %I.%I (topic, message_key, key_seq) WHERE status = ''WAITING''',
            'outbox_events_waiting' || suffix, schema_name, part);
        EXECUTE pg_catalog.format('ALTER TABLE %s ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
                                  parent, schema_name, part, outbox_event_id_floor(day_start), outbox_event_id_floor(day_end));
        created := created + 1;
        day_start := day_end;
    END LOOP;
    RETURN created;
END
$fn$;

-- The partitions of `parent`, oldest first: name, bound (as ATTACH PARTITION takes it),
-- the emit time their ids end at, and whether a DETACH ... CONCURRENTLY of it was
-- interrupted (it then needs DETACH ... FINALIZE). For the janitor and `boxcar purge`.
CREATE FUNCTION outbox_partitions(parent regclass)
    RETURNS TABLE (partition_name text, bound text, ends_at timestamptz, detach_pending boolean)
    LANGUAGE sql
    STABLE
AS $fn$
    SELECT c.relname::text,
           pg_catalog.pg_get_expr(c.relpartbound, c.oid),
           CASE WHEN pg_catalog.pg_get_expr(c.relpartbound, c.oid) LIKE '%TO (MAXVALUE)' THEN 'infinity'::timestamptz
                ELSE outbox_event_id_time(pg_catalog.substring(pg_catalog.pg_get_expr(c.relpartbound, c.oid),
                                                               'TO \(''([0-9a-f-]+)''\)')::uuid) END,
           i.inhdetachpending
    FROM pg_catalog.pg_inherits AS i
    JOIN pg_catalog.pg_class AS c
      ON c.oid = i.inhrelid
    WHERE i.inhparent = parent
    ORDER BY 3, 1
$fn$;

-- How many events the partition (or detached partition) `part` holds when every one of them
-- is finished since before `cutoff` (PUBLISHED before it, or DEAD and discarded before
-- it), else NULL: one descent of a partial index per unfinished status, then a count.
CREATE FUNCTION outbox_partition_retirable(part regclass, cutoff timestamptz)
    RETURNS bigint
    LANGUAGE plpgsql
    STABLE
AS $fn$
DECLARE
    blocked boolean;
    events bigint;
BEGIN
    EXECUTE pg_catalog.format(
        'SELECT EXISTS (SELECT 1 FROM %1$s WHERE status IN (''PENDING'', ''RETRYABLE''))'
        ' OR EXISTS (SELECT 1 FROM %1$s WHERE status = ''PUBLISHING'')'
        ' OR EXISTS (SELECT 1 FROM %1$s WHERE status = ''WAITING'')'
        ' OR EXISTS (SELECT 1 FROM %1$s WHERE status = ''DEAD'' AND (discarded_at IS NULL OR discarded_at > $1))'
        ' OR EXISTS (SELECT 1 FROM %1$s WHERE status = ''PUBLISHED'' AND published_at > $1)', part)
    INTO blocked
    USING cutoff;
    IF blocked THEN
        RETURN NULL;
    END IF;
    EXECUTE pg_catalog.format('SELECT pg_catalog.count(*) FROM %s', part) INTO events;
    RETURN events;
END
$fn$;

-- Today's table holds every event id below the first daily bound: the start of the UTC
-- day after tomorrow, a day or more away, so emits go on into it until 0019 swaps the
-- tables in. NOT VALID: existing rows are validated by 0019 without blocking writers.
DO $do$
DECLARE
    first_bound timestamptz :=
        pg_catalog.date_trunc('day', pg_catalog.now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' + '2 days'::interval;
BEGIN
    EXECUTE pg_catalog.format(
        'ALTER TABLE outbox_events ADD CONSTRAINT outbox_events_legacy_bound CHECK (event_id < %L::uuid) NOT VALID',
        outbox_event_id_floor(first_bound));
END
$do$;

SELECT pg_catalog.set_config('search_path',
    'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION outbox_create_partitions(regclass, integer) SET search_path FROM CURRENT;
ALTER FUNCTION outbox_partitions(regclass) SET search_path FROM CURRENT;
ALTER FUNCTION outbox_partition_retirable(regclass, timestamptz) SET search_path FROM CURRENT;
