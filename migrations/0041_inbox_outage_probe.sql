-- boxcar:compatible-with 40
-- What tells a database outage from a handler's own failure (docs/worker.md,
-- "Infrastructure failures are not attempts"). SQLSTATE classes 08, 53, 57P0x and 58 also
-- come from a handler's statement on a healthy server (temp_file_limit, a dblink peer,
-- RAISE ... USING ERRCODE), so the worker gives such an attempt back uncharged only when
-- a probe fails too, and only a bounded number of times per receipt. Older builds read
-- none of this and write nothing here: compatible with 40.

-- The uncharged hand-backs after confirmed outages (kHandBackInOutage), bounded by
-- worker.max_outage_hand_backs. A constant default: no rewrite, ACCESS EXCLUSIVE for an
-- instant only.
ALTER TABLE inbox_receipts ADD COLUMN outage_hand_backs integer NOT NULL DEFAULT 0;

-- Never holds a row. It says where the write probe writes: in its schema and on its
-- tablespace. Where handlers write to tables on another tablespace than the database's
-- default, an operator moves it there (ALTER TABLE ... SET TABLESPACE, instant on an
-- empty table) so that a full disk there is what the probe sees.
CREATE TABLE inbox_outage_probe (
    probed_at timestamptz NOT NULL
);

-- The write probe. A `SELECT 1` passes on a full disk, and so does a small insert into a
-- page that still has room, so the probe creates a new table (a new, empty file) and
-- inserts one row into it: that must allocate a page. On a full tablespace it fails with
-- 53100 ("could not extend file"); on failing storage with class 58. Both run in a
-- subtransaction that it rolls back, so nothing stays behind however it is called.
-- CREATE TABLE rather than TRUNCATE of a standing table: TRUNCATE needs ACCESS EXCLUSIVE,
-- and a pg_dump of the schema holds ACCESS SHARE on every table until it ends, so during a
-- dump that probe would only time out. Concurrent probes create the same name: each waits
-- for the one before it to roll back (milliseconds). Dynamic SQL: with pg_catalog first on
-- the search_path an unqualified CREATE TABLE would target pg_catalog.
-- SECURITY DEFINER: the worker needs EXECUTE on this function, no right to create tables.
CREATE FUNCTION inbox_outage_probe()
RETURNS void
LANGUAGE plpgsql
SECURITY DEFINER
SET default_tablespace = ''
AS $$
DECLARE
    probe_schema name;
    probe_tablespace name;
BEGIN
    SELECT n.nspname, t.spcname
    INTO probe_schema, probe_tablespace
    FROM pg_catalog.pg_class AS c
    JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
    LEFT JOIN pg_catalog.pg_tablespace AS t ON t.oid = c.reltablespace
    WHERE c.oid = 'inbox_outage_probe'::pg_catalog.regclass;
    BEGIN
        EXECUTE pg_catalog.format('CREATE TABLE %I.inbox_outage_probe_scratch (probed_at timestamptz NOT NULL)%s',
                                  probe_schema,
                                  CASE WHEN probe_tablespace IS NULL THEN ''
                                       ELSE pg_catalog.format(' TABLESPACE %I', probe_tablespace) END);
        EXECUTE pg_catalog.format('INSERT INTO %I.inbox_outage_probe_scratch (probed_at) VALUES (pg_catalog.now())',
                                  probe_schema);
        -- The write landed: undo it (and the table) by leaving the subtransaction.
        RAISE EXCEPTION 'outage probe written' USING ERRCODE = 'BX001';
    EXCEPTION WHEN SQLSTATE 'BX001' THEN
        NULL;
    END;
END
$$;

-- Its search_path: pg_catalog first, then this schema, then pg_temp (docs/security.md,
-- section 1), so no object planted in this schema can stand in for a built-in, and no
-- temporary one for ours. Pinned after CREATE FUNCTION, which creates in the first schema
-- of the search_path: with pg_catalog first, a superuser's run would put the function
-- there. SET search_path FROM CURRENT takes this transaction's value.
SELECT pg_catalog.set_config('search_path',
                             'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION inbox_outage_probe() SET search_path FROM CURRENT;

REVOKE ALL ON FUNCTION inbox_outage_probe() FROM PUBLIC;
