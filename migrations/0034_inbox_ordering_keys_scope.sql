-- boxcar:compatible-with 32
-- Ordering keys are scoped, step 2 of 4 (docs/ordering.md, "Keys are scoped"). A key row
-- was (consumer, ordering_key): two tenants whose order ids collide waited behind each
-- other, and a tenant able to send one failing message per key value could leave a DEAD
-- head under `block` on every value, after which another tenant's messages for those keys
-- waited forever. A key is now (consumer, scope_kind, scope_id, ordering_key): each scope
-- (tenant, or the global scope) has its own keys, heads and order. `source` is not part of
-- it: the producers of one scope write about the same aggregates (an order's events from
-- the orders and the payments service), which the key keeps in one order.
--
-- Existing rows: each key row takes the scope of its head receipt, and the receipts of
-- other scopes that were WAITING behind it become keys of their own, their first one (in
-- the key's old order) the head and PENDING. The key table holds only keys with work.
--
-- Locks: inbox_receipts in SHARE mode first, then the key table. A key-order trigger that
-- is running when the functions are replaced goes on with the body it started with, and a
-- statement of it that waited for this transaction's lock on the key table would run the
-- unscoped body against the scoped table (moving another tenant's key). SHARE waits for
-- every writer of inbox_receipts to finish (bounded by the runner's lock_timeout, then
-- retried) and holds new ones (accepts, claims, completions) until this commits, which
-- takes as long as reading the keys with work and the receipts waiting in them; readers go
-- on. Writers take their locks in the same order (the receipt, then the key table).
--
-- The two functions are rewritten for the scoped key, and both, being SECURITY DEFINER,
-- now resolve names with pg_catalog first (docs/security.md, section 1): an operator or
-- function planted in this schema can no longer stand in for a built-in one. A binary that
-- knows 0032 calls inbox_settle_keys with the same arguments and reads the key table by
-- consumer and key, which still works (an unblock of a key then releases it in every
-- scope): compatible with 32.

LOCK TABLE inbox_receipts IN SHARE MODE;
LOCK TABLE inbox_ordering_keys IN ACCESS EXCLUSIVE MODE;

ALTER TABLE inbox_ordering_keys
    ADD COLUMN scope_kind text,
    ADD COLUMN scope_id text;

UPDATE inbox_ordering_keys AS k
SET scope_kind = r.scope_kind,
    scope_id = r.scope_id
FROM inbox_receipts AS r
WHERE r.id = k.head_id;

-- A key row whose head receipt is gone has no scope to take; its WAITING receipts, if any,
-- get keys of their own below like every other scope's.
DELETE FROM inbox_ordering_keys
WHERE scope_kind IS NULL;

ALTER TABLE inbox_ordering_keys
    ALTER COLUMN scope_kind SET NOT NULL,
    ALTER COLUMN scope_id SET NOT NULL,
    DROP CONSTRAINT inbox_ordering_keys_pkey,
    ADD PRIMARY KEY (consumer, scope_kind, scope_id, ordering_key);

-- The receipts that waited behind another scope's head: per (consumer, scope, key) with no
-- key row, the first in key order becomes the head. next_seq: the last position handed
-- out in the old key, so the positions of receipts accepted from now on come after every
-- position already held. The promotion WAITING -> PENDING fires no key-order trigger
-- (its WHEN leaves out updates from WAITING).
WITH heads AS (
    SELECT DISTINCT ON (w.consumer, w.scope_kind, w.scope_id, w.ordering_key)
           w.id, w.consumer, w.scope_kind, w.scope_id, w.ordering_key
    FROM inbox_receipts AS w
    WHERE w.status = 'WAITING'
      AND NOT EXISTS (SELECT 1
                      FROM inbox_ordering_keys AS k
                      WHERE k.consumer = w.consumer
                        AND k.scope_kind = w.scope_kind
                        AND k.scope_id = w.scope_id
                        AND k.ordering_key = w.ordering_key)
    ORDER BY w.consumer, w.scope_kind, w.scope_id, w.ordering_key, w.key_seq NULLS FIRST, w.id
), keyed AS (
    INSERT INTO inbox_ordering_keys (consumer, scope_kind, scope_id, ordering_key, head_id, next_seq)
    SELECT h.consumer, h.scope_kind, h.scope_id, h.ordering_key, h.id,
           (SELECT COALESCE(pg_catalog.max(w.key_seq), 0)
            FROM inbox_receipts AS w
            WHERE w.consumer = h.consumer
              AND w.ordering_key = h.ordering_key
              AND w.status = 'WAITING')
    FROM heads AS h
)
UPDATE inbox_receipts AS r
SET status = 'PENDING',
    updated_at = pg_catalog.now()
FROM heads AS h
WHERE r.id = h.id;

-- The trigger function of 0012, with the key's scope. held / holds: whether OLD / NEW
-- holds its key (is the head, or waits to become it); a DEAD receipt holds it under
-- `block` until an operator unblocks or discards it. One function, no helpers: each call
-- of a function with its own search_path saves and restores the setting.
CREATE OR REPLACE FUNCTION inbox_receipts_key_order()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    receipt inbox_receipts;
    held boolean := false;
    holds boolean := false;
    head bigint;
    seq bigint;
BEGIN
    IF TG_OP = 'DELETE' THEN
        receipt := OLD;
    ELSE
        receipt := NEW;
    END IF;
    IF TG_OP <> 'INSERT' THEN
        held := OLD.status IN ('PENDING', 'RETRYABLE', 'PROCESSING', 'WAITING')
                OR (OLD.status = 'DEAD' AND OLD.park_after IS NULL
                    AND OLD.key_released_at IS NULL AND OLD.discarded_at IS NULL);
    END IF;
    IF TG_OP <> 'DELETE' THEN
        holds := NEW.status IN ('PENDING', 'RETRYABLE', 'PROCESSING', 'WAITING')
                 OR (NEW.status = 'DEAD' AND NEW.park_after IS NULL
                     AND NEW.key_released_at IS NULL AND NEW.discarded_at IS NULL);
    END IF;

    IF holds AND NOT held THEN
        -- It starts to hold its key (accepted, or replayed after it stopped holding): the
        -- head when the key has none, else WAITING behind it. The upsert's row lock
        -- serialises the accepts of one key until they commit: key order is commit order.
        INSERT INTO inbox_ordering_keys AS k (consumer, scope_kind, scope_id, ordering_key, head_id)
        VALUES (NEW.consumer, NEW.scope_kind, NEW.scope_id, NEW.ordering_key, NEW.id)
        ON CONFLICT (consumer, scope_kind, scope_id, ordering_key)
        DO UPDATE SET next_seq = k.next_seq + 1
        RETURNING k.head_id, k.next_seq INTO head, seq;
        IF head <> NEW.id THEN
            -- A replayed receipt keeps its key_seq: it comes next.
            UPDATE inbox_receipts
            SET status = 'WAITING',
                key_seq = COALESCE(key_seq, seq)
            WHERE id = NEW.id;
        END IF;
    ELSIF held AND NOT holds THEN
        IF OLD.status = 'WAITING' THEN
            RETURN NULL;  -- not the head: the key is unchanged
        END IF;
        -- The head let go: lock the key's row in a statement of its own, so the search for
        -- the next one runs with a fresh snapshot (READ COMMITTED, a volatile function)
        -- that sees every accept that committed while this transaction waited for the lock.
        PERFORM 1
        FROM inbox_ordering_keys
        WHERE consumer = receipt.consumer
          AND scope_kind = receipt.scope_kind
          AND scope_id = receipt.scope_id
          AND ordering_key = receipt.ordering_key
          AND head_id = receipt.id
        FOR NO KEY UPDATE;
        IF NOT FOUND THEN
            RETURN NULL;
        END IF;
        -- The next one becomes the head: its promotion and the key's new head in one
        -- statement (the key's row is locked by this transaction already).
        WITH next AS (
            UPDATE inbox_receipts
            SET status = 'PENDING',
                updated_at = pg_catalog.now()
            WHERE id = (SELECT w.id
                        FROM inbox_receipts AS w
                        WHERE w.consumer = receipt.consumer
                          AND w.scope_kind = receipt.scope_kind
                          AND w.scope_id = receipt.scope_id
                          AND w.ordering_key = receipt.ordering_key
                          AND w.status = 'WAITING'
                        ORDER BY w.key_seq NULLS FIRST, w.id
                        LIMIT 1)
            RETURNING id
        )
        UPDATE inbox_ordering_keys AS k
        SET head_id = next.id,
            blocked_since = NULL
        FROM next
        WHERE k.consumer = receipt.consumer
          AND k.scope_kind = receipt.scope_kind
          AND k.scope_id = receipt.scope_id
          AND k.ordering_key = receipt.ordering_key
        RETURNING k.head_id INTO head;
        IF head IS NULL THEN
            DELETE FROM inbox_ordering_keys
            WHERE consumer = receipt.consumer
              AND scope_kind = receipt.scope_kind
              AND scope_id = receipt.scope_id
              AND ordering_key = receipt.ordering_key;
        END IF;
    ELSIF holds AND NEW.status IN ('RETRYABLE', 'DEAD') THEN
        -- The head failed: its key is blocked from now until the head lets go.
        UPDATE inbox_ordering_keys
        SET blocked_since = pg_catalog.now()
        WHERE consumer = NEW.consumer
          AND scope_kind = NEW.scope_kind
          AND scope_id = NEW.scope_id
          AND ordering_key = NEW.ordering_key
          AND head_id = NEW.id
          AND blocked_since IS NULL;
    END IF;
    RETURN NULL;
END;
$$;

-- The settlement of 0021 with the key's scope: hands each key whose head is one of the
-- given receipts to its next WAITING receipt, or removes the key when none waits; returns
-- how many receipts it promoted. Only receipts this caller holds the claim of count, and
-- only in the transaction that locked them (locked_in). It locks the keys in a statement
-- of its own, in (consumer, scope_kind, scope_id, ordering_key) byte order, the order
-- accept_many inserts keyed receipts in (inbox/src/inbox.cpp), so no two of them wait on
-- each other in a cycle; the search for the next receipt then runs with a fresh snapshot.
CREATE OR REPLACE FUNCTION inbox_settle_keys(receipt_ids bigint[], claim_tokens uuid[], locked_in xid8)
RETURNS integer
LANGUAGE plpgsql
SECURITY DEFINER
AS $$
DECLARE
    consumers text[];
    scope_kinds text[];
    scope_ids text[];
    ordering_keys text[];
    promoted integer;
BEGIN
    IF pg_catalog.pg_current_xact_id_if_assigned() IS DISTINCT FROM locked_in THEN
        RETURN 0;
    END IF;
    -- The keys these receipts head, locked; once locked, their heads cannot change, so the
    -- next statement takes the keys from here instead of joining the receipts again.
    SELECT pg_catalog.array_agg(locked.consumer), pg_catalog.array_agg(locked.scope_kind),
           pg_catalog.array_agg(locked.scope_id), pg_catalog.array_agg(locked.ordering_key)
    INTO consumers, scope_kinds, scope_ids, ordering_keys
    FROM (SELECT k.consumer, k.scope_kind, k.scope_id, k.ordering_key
          FROM ROWS FROM (pg_catalog.unnest(receipt_ids), pg_catalog.unnest(claim_tokens)) AS c(id, token)
          JOIN inbox_receipts AS r ON r.id = c.id AND r.claim_token = c.token
          JOIN inbox_ordering_keys AS k
            ON k.consumer = r.consumer AND k.scope_kind = r.scope_kind AND k.scope_id = r.scope_id
           AND k.ordering_key = r.ordering_key AND k.head_id = r.id
          ORDER BY k.consumer COLLATE "C", k.scope_kind COLLATE "C", k.scope_id COLLATE "C",
                   k.ordering_key COLLATE "C"
          FOR NO KEY UPDATE OF k) AS locked;
    IF consumers IS NULL THEN
        RETURN 0;
    END IF;

    WITH next AS (
        SELECT h.consumer, h.scope_kind, h.scope_id, h.ordering_key, n.id
        FROM ROWS FROM (pg_catalog.unnest(consumers), pg_catalog.unnest(scope_kinds), pg_catalog.unnest(scope_ids),
                        pg_catalog.unnest(ordering_keys)) AS h(consumer, scope_kind, scope_id, ordering_key)
        LEFT JOIN LATERAL (
            SELECT w.id
            FROM inbox_receipts AS w
            WHERE w.consumer = h.consumer
              AND w.scope_kind = h.scope_kind
              AND w.scope_id = h.scope_id
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
          AND k.scope_kind = next.scope_kind
          AND k.scope_id = next.scope_id
          AND k.ordering_key = next.ordering_key
    ), emptied AS (
        DELETE FROM inbox_ordering_keys AS k
        USING next
        WHERE next.id IS NULL
          AND k.consumer = next.consumer
          AND k.scope_kind = next.scope_kind
          AND k.scope_id = next.scope_id
          AND k.ordering_key = next.ordering_key
    )
    SELECT pg_catalog.count(*)::integer INTO promoted FROM promote;
    RETURN promoted;
END;
$$;

-- Pin the search_path of both functions, and of the fair claim (0026, SECURITY INVOKER,
-- which had this schema first too): pg_catalog first, this schema, pg_temp last. Set for
-- this transaction and captured with FROM CURRENT; last in the file, since with
-- pg_catalog first a CREATE would target pg_catalog.
SELECT pg_catalog.set_config('search_path',
    'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION inbox_receipts_key_order() SET search_path FROM CURRENT;
ALTER FUNCTION inbox_settle_keys(bigint[], uuid[], xid8) SET search_path FROM CURRENT;
ALTER FUNCTION inbox_claim_fair(text, bigint, double precision, text, text) SET search_path FROM CURRENT;
