-- boxcar:compatible-with 16
-- boxcar:previous-checksum 7dc931ca3787fc49fea3e9c4f02db7f47cbda03309a8654658a8c3bd23584a3a
-- (this file before its comments were reworded: the same statements)
-- Set-based key settlement for a batch of ordered receipts (docs/ordering.md, "Cost").
-- The row trigger of 0012 moves a key on for each receipt that lets go of it: two
-- statements per receipt. A batch of 32 completes with one UPDATE, so an ordered batch
-- ran 32 times the statements of an unordered one (ordered_batched_t16 measured 0.47 of
-- unordered). The worker now settles the keys of a batch's receipts before it
-- completes them, in two statements for the whole batch; the row trigger then finds
-- each key's head already moved and does nothing. A binary that does not call it keeps
-- the row trigger's per-receipt path: compatible with 16.

-- The function below pins its search_path like 0012's trigger function (SECURITY DEFINER).
SELECT pg_catalog.set_config('search_path',
                             pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_catalog, pg_temp', true);

-- Hands each key whose head is one of the given receipts to its next WAITING receipt, or
-- removes the key when none waits; returns how many receipts it promoted. Only receipts
-- this caller holds the claim of (the token implies PROCESSING; the status itself would
-- steer the plan to the leases index, inbox/src/worker_queries.hpp) count, and only in
-- the transaction that locked them (locked_in, as the completion checks it): the worker
-- calls it there, before the completion, so the promotions commit or roll back with it.
-- After a handler's raw COMMIT the call would run in a transaction of its own and commit
-- a promotion without the completion; it then does nothing. Like the row trigger, it locks the keys in a
-- statement of its own (in key order: two workers never wait on each other in a cycle),
-- so the search for the next receipt runs with a fresh snapshot that sees every accept
-- that committed while it waited.
CREATE FUNCTION inbox_settle_keys(receipt_ids bigint[], claim_tokens uuid[], locked_in xid8)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
AS $$
DECLARE
    consumers text[];
    ordering_keys text[];
    promoted integer;
BEGIN
    IF pg_catalog.pg_current_xact_id_if_assigned() IS DISTINCT FROM locked_in THEN
        RETURN 0;
    END IF;
    -- The keys these receipts head, locked; once locked, their heads cannot change, so the
    -- next statement takes the keys from here instead of joining the receipts again.
    SELECT pg_catalog.array_agg(locked.consumer), pg_catalog.array_agg(locked.ordering_key)
    INTO consumers, ordering_keys
    FROM (SELECT k.consumer, k.ordering_key
          FROM ROWS FROM (pg_catalog.unnest(receipt_ids), pg_catalog.unnest(claim_tokens)) AS c(id, token)
          JOIN inbox_receipts AS r ON r.id = c.id AND r.claim_token = c.token
          JOIN inbox_ordering_keys AS k
            ON k.consumer = r.consumer AND k.ordering_key = r.ordering_key AND k.head_id = r.id
          ORDER BY k.consumer, k.ordering_key
          FOR NO KEY UPDATE OF k) AS locked;
    IF consumers IS NULL THEN
        RETURN 0;
    END IF;

    WITH next AS (
        SELECT h.consumer, h.ordering_key, n.id
        FROM ROWS FROM (pg_catalog.unnest(consumers), pg_catalog.unnest(ordering_keys)) AS h(consumer, ordering_key)
        LEFT JOIN LATERAL (
            SELECT w.id
            FROM inbox_receipts AS w
            WHERE w.consumer = h.consumer
              AND w.ordering_key = h.ordering_key
              AND w.status = 'WAITING'
            ORDER BY w.key_seq NULLS FIRST, w.id
            LIMIT 1) AS n ON true
    ), promote AS (
        UPDATE inbox_receipts AS r
        SET status = 'PENDING',
            updated_at = pg_catalog.now()
        FROM next
        WHERE r.id = next.id
        RETURNING r.id
    ), moved AS (
        UPDATE inbox_ordering_keys AS k
        SET head_id = next.id,
            blocked_since = NULL
        FROM next
        WHERE next.id IS NOT NULL
          AND k.consumer = next.consumer
          AND k.ordering_key = next.ordering_key
    ), emptied AS (
        DELETE FROM inbox_ordering_keys AS k
        USING next
        WHERE next.id IS NULL
          AND k.consumer = next.consumer
          AND k.ordering_key = next.ordering_key
    )
    SELECT pg_catalog.count(*)::integer INTO promoted FROM promote;
    RETURN promoted;
END;
$$;

-- As the owner's function it could move any key: the worker role alone may call it
-- (core/src/roles_queries.hpp grants it).
REVOKE ALL ON FUNCTION inbox_settle_keys(bigint[], uuid[], xid8) FROM PUBLIC;
