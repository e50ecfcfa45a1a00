-- boxcar:compatible-with 16
-- boxcar:previous-checksum 5d31034b1a027ac87d837c7dadcfce198cfaed22809237f4526a9b2266a2a222
-- (this file before its comments were reworded: the same statements)
-- The fair claim (docs/worker.md, "Claims") as a function that runs it with a generic plan.
-- As a prepared statement the claim was planned again on most executions (pg_stat_statements:
-- 2,763 plans of 6,302 calls in bench_worker's batch handler case, 5,766 of 6,626 in an
-- idle loop), and planning its CTEs takes 1.1-1.3 ms against 0.9-1.6 ms for running
-- them (EXPLAIN ANALYZE of a claim of 32 on an idle server): the plan cache weighs a
-- custom plan's planning at 1000 * cpu_operator_cost per relation, far below what this
-- statement's takes, so it kept choosing custom plans. The plan it makes without the
-- parameters' values is the same index-only plan (every scan bounded by an index range on
-- inbox_receipts_claimable_scope or inbox_receipts_claimable, the update by primary key;
-- tests/pg/worker_fairness_test.cpp checks the plan the function runs), so the function
-- pins plan_cache_mode = force_generic_plan: PL/pgSQL plans the statement once per
-- session. The statement is the one the worker prepared until now, unchanged but for its
-- parameters' names. SECURITY INVOKER: it runs with the worker's own privileges.
-- The worker of this version calls it (inbox/src/worker_queries.hpp); one of an earlier
-- version keeps its own statement: compatible with 16.

SELECT pg_catalog.set_config('search_path',
                             pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_catalog, pg_temp', true);

-- The fair claim's steps:
-- - after_cursor, from_start: a loose index scan (one index descent per scope) over the
--   scopes with claimable rows, in (scope_kind, scope_id) order, starting after the
--   worker's round-robin cursor and wrapping around to it. Each step also reads the
--   scope's oldest available_at (its head), so a scope with nothing due (only retries in
--   backoff) costs that one descent and takes no share.
-- - scopes: the first claim_limit scopes whose head is due. Each gets an equal share of
--   the limit, ceil(claim_limit / n) (the last one what is left): its oldest due
--   non-suspect receipts, SKIP LOCKED.
-- - fill: when the shares come back short (a scope had fewer due than its share, or they
--   were locked by another worker), the rest of the limit goes to the oldest due
--   receipts, so a short claim still means "nothing more due". LIMIT 0 when the shares
--   filled the claim: the scan never starts.
-- Returns the last scope visited (cursor_kind, cursor_id) on every row: the worker's next
-- cursor. Claimed receipts are durable when the caller's autocommit statement ends.
CREATE FUNCTION inbox_claim_fair(claim_consumer text, claim_limit bigint, lease_ms double precision,
                                 cursor_scope_kind text, cursor_scope_id text)
RETURNS TABLE (id bigint, claim_token text, attempts integer, scope_kind text, scope_id text, source text,
               consumer text, message_id text, event_type text, schema_version integer, payload text,
               metadata text, status text, suspect boolean, ordered boolean, cursor_kind text, cursor_id text)
LANGUAGE plpgsql
SET search_path FROM CURRENT
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH RECURSIVE after_cursor AS (
        (SELECT scope_kind, scope_id, available_at AS head_at, 1 AS lap, 1 AS step
         FROM inbox_receipts
         WHERE consumer = claim_consumer
           AND status IN ('PENDING', 'RETRYABLE')
           AND (scope_kind, scope_id) > (cursor_scope_kind, cursor_scope_id)
         ORDER BY scope_kind, scope_id, available_at
         LIMIT 1)
        UNION ALL
        SELECT n.scope_kind, n.scope_id, n.available_at, 1, s.step + 1
        FROM after_cursor AS s
        CROSS JOIN LATERAL (
            SELECT scope_kind, scope_id, available_at
            FROM inbox_receipts
            WHERE consumer = claim_consumer
              AND status IN ('PENDING', 'RETRYABLE')
              AND (scope_kind, scope_id) > (s.scope_kind, s.scope_id)
            ORDER BY scope_kind, scope_id, available_at
            LIMIT 1
        ) AS n
    ),
    from_start AS (
        (SELECT scope_kind, scope_id, available_at AS head_at, 2 AS lap, 1 AS step
         FROM inbox_receipts
         WHERE consumer = claim_consumer
           AND status IN ('PENDING', 'RETRYABLE')
           AND (scope_kind, scope_id) <= (cursor_scope_kind, cursor_scope_id)
         ORDER BY scope_kind, scope_id, available_at
         LIMIT 1)
        UNION ALL
        SELECT n.scope_kind, n.scope_id, n.available_at, 2, s.step + 1
        FROM from_start AS s
        CROSS JOIN LATERAL (
            SELECT scope_kind, scope_id, available_at
            FROM inbox_receipts
            WHERE consumer = claim_consumer
              AND status IN ('PENDING', 'RETRYABLE')
              AND (scope_kind, scope_id) > (s.scope_kind, s.scope_id)
              AND (scope_kind, scope_id) <= (cursor_scope_kind, cursor_scope_id)
            ORDER BY scope_kind, scope_id, available_at
            LIMIT 1
        ) AS n
    ),
    -- Evaluated lazily: the scan stops once claim_limit scopes with a due head are found.
    scopes AS MATERIALIZED (
        SELECT scope_kind, scope_id, lap, step
        FROM (SELECT * FROM after_cursor UNION ALL SELECT * FROM from_start) AS visited
        WHERE head_at <= pg_catalog.now()
        LIMIT claim_limit
    ),
    share AS MATERIALIZED (
        SELECT (claim_limit + pg_catalog.count(*) - 1::bigint) / GREATEST(pg_catalog.count(*), 1::bigint) AS per_scope
        FROM scopes
    ),
    shares AS MATERIALIZED (
        SELECT p.id
        FROM scopes AS s
        CROSS JOIN share
        CROSS JOIN LATERAL (
            SELECT id
            FROM inbox_receipts
            WHERE consumer = claim_consumer
              -- The scope as a range of (scope_kind, scope_id), not two equalities: with
              -- equalities the planner drops the scope columns from the ORDER BY below as
              -- constant, and then inbox_receipts_claimable (consumer, available_at) has the
              -- order too. With statistics that saw one scope only (a hot tenant's backlog
              -- analysed before the others arrived) it chose that index and walked the hot
              -- tenant's older rows for every other scope's share: 0.4 s per claim at a
              -- 100,000 backlog, until the next ANALYZE (docs/schema.md, "The fair
              -- claim's plan"). As a range the scope columns stay in the order, which only
              -- inbox_receipts_claimable_scope provides, and bound its scan.
              AND (scope_kind, scope_id) >= (s.scope_kind, s.scope_id)
              AND (scope_kind, scope_id) <= (s.scope_kind, s.scope_id)
              AND status IN ('PENDING', 'RETRYABLE')
              AND available_at <= pg_catalog.now()
              AND NOT suspect
            ORDER BY scope_kind, scope_id, available_at
            LIMIT share.per_scope
            FOR NO KEY UPDATE SKIP LOCKED
        ) AS p
        -- n shares of ceil(claim_limit / n) can exceed claim_limit: the last scope gets what
        -- is left. The nested loop stops here, so no row past the limit is even locked.
        LIMIT claim_limit
    ),
    -- SKIP LOCKED does not skip this statement's own locks: the shares are excluded by id.
    fill AS (
        SELECT id
        FROM inbox_receipts
        WHERE consumer = claim_consumer
          AND status IN ('PENDING', 'RETRYABLE')
          AND available_at <= pg_catalog.now()
          AND NOT suspect
          AND id NOT IN (SELECT id FROM shares)
        ORDER BY available_at
        LIMIT GREATEST(claim_limit - (SELECT pg_catalog.count(*) FROM shares), 0::bigint)
        FOR NO KEY UPDATE SKIP LOCKED
    ),
    due AS (
        SELECT id FROM shares
        UNION ALL
        SELECT id FROM fill
    ),
    last_scope AS (
        SELECT scope_kind, scope_id
        FROM scopes
        ORDER BY lap DESC, step DESC
        LIMIT 1
    )
    UPDATE inbox_receipts AS r
    SET status = 'PROCESSING',
        claim_token = pg_catalog.gen_random_uuid(),
        lease_expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => lease_ms / 1000::double precision),
        attempts = r.attempts + 1,
        updated_at = pg_catalog.now()
    -- An array of ids, not a join with `due`: the generic plan cannot know claim_limit
    -- and would hash-join a guessed tenth of the table (a sequential scan that grows with
    -- the backlog); `= ANY` of an array always probes the primary key.
    WHERE r.id = ANY ((SELECT pg_catalog.array_agg(id) FROM due)::bigint[])
    RETURNING r.id, r.claim_token::text AS claim_token, r.attempts, r.scope_kind, r.scope_id, r.source,
              r.consumer, r.message_id, r.event_type, r.schema_version, r.payload::text AS payload,
              r.metadata::text AS metadata, r.status, r.suspect, r.ordering_key IS NOT NULL AS ordered,
              (SELECT scope_kind FROM last_scope) AS cursor_kind, (SELECT scope_id FROM last_scope) AS cursor_id;
END;
$$;

-- The worker role alone may call it (core/src/roles_queries.hpp grants it).
REVOKE ALL ON FUNCTION inbox_claim_fair(text, bigint, double precision, text, text) FROM PUBLIC;
