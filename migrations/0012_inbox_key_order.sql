-- boxcar:compatible-with 11
-- boxcar:previous-checksum b627f4eb2e11b5ca53d0dc3f81f9685a8b35a397c2aff34caf2bfec926248023
-- (this file before its comments were reworded: the same statements)
-- Per-key ordering of receipts (docs/ordering.md). A consumer may opt in, per Inbox,
-- to an ordering key taken from each message; then at most one receipt of a key is
-- claimable or in flight, oldest accepted first, whatever the number of workers. The
-- receipts behind a key's head wait in a status of their own, WAITING, which no claim
-- index covers, so the claim statements stay as they are. Triggers keep the head, so
-- every path that finishes a receipt (worker, lease recovery, operator, retention)
-- moves its key on the same way. A binary that knows only 0011 never writes an ordering
-- key, and the triggers handle the ordered rows a newer ingress writes: compatible with 11.

-- ordering_key:    the message's key under its consumer's ordering rule; NULL: unordered.
-- park_after:      the head-of-line policy recorded at accept: NULL is `block` (a DEAD
--                  head keeps its key blocked until an operator unblocks it); N is
--                  `park_after(N)` (DEAD after N attempts, and a DEAD receipt never blocks).
-- key_seq:         position within the key, assigned under the key's row lock when the
--                  receipt had to wait (the accept order of the key); NULL for a receipt
--                  that was its key's head on arrival.
-- key_released_at: when an operator released the key a DEAD head blocked (boxcar dead
--                  unblock); discarding that receipt releases the key too.
ALTER TABLE inbox_receipts
    ADD COLUMN ordering_key text,
    ADD COLUMN park_after integer,
    ADD COLUMN key_seq bigint,
    ADD COLUMN key_released_at timestamptz;

ALTER TABLE inbox_receipts
    ADD CONSTRAINT inbox_receipts_ordering CHECK (
        (ordering_key IS NULL OR octet_length(ordering_key) BETWEEN 1 AND 512)
        AND (park_after IS NULL OR (ordering_key IS NOT NULL AND park_after >= 1))
        AND (key_seq IS NULL OR ordering_key IS NOT NULL)
        AND (key_released_at IS NULL OR status = 'DEAD')) NOT VALID;

-- WAITING joins the statuses. NOT VALID: the rows already present were checked against a
-- subset of these values, and a full scan would hold the table lock while it runs.
ALTER TABLE inbox_receipts DROP CONSTRAINT inbox_receipts_status;
ALTER TABLE inbox_receipts
    ADD CONSTRAINT inbox_receipts_status CHECK (
        status IN ('PENDING', 'PROCESSING', 'RETRYABLE', 'COMPLETED', 'DEAD', 'WAITING')) NOT VALID;

-- One row per (consumer, key) that has a head: the receipt that is claimable, in flight,
-- retrying, or DEAD and blocking. Its row lock serialises everything that changes the
-- key's head (an accept, a head finishing, a replay); deleted when the key empties, so
-- the table is as large as the set of keys with work, not every key ever seen.
-- next_seq:      the last key_seq handed out.
-- blocked_since: when the head first failed (RETRYABLE or DEAD); NULL while it has not.
CREATE TABLE inbox_ordering_keys (
    consumer      text        NOT NULL,
    ordering_key  text        NOT NULL,
    head_id       bigint      NOT NULL,
    next_seq      bigint      NOT NULL DEFAULT 0,
    blocked_since timestamptz,
    PRIMARY KEY (consumer, ordering_key)
);

-- Blocked keys per consumer: the collector's gauge and `boxcar status`, without a scan.
CREATE INDEX inbox_ordering_keys_blocked
    ON inbox_ordering_keys (consumer, blocked_since)
    WHERE blocked_since IS NOT NULL;

ALTER TABLE inbox_ordering_keys SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000
);

-- The function below pins its search_path to this schema, then pg_catalog, then pg_temp
-- last (SET search_path FROM CURRENT takes the value set here, for this transaction only):
-- the trigger function runs as its owner (SECURITY DEFINER), so no caller's search_path or
-- temporary table may redirect it.
SELECT pg_catalog.set_config('search_path',
                             pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_catalog, pg_temp', true);

-- One trigger function for the three triggers below, without helper functions: each call of
-- a function with its own search_path saves and restores the setting, which cost the drain
-- of an ordered consumer a measurable share.
-- held / holds: whether OLD / NEW holds its key (is the head, or waits to become it); a
-- DEAD receipt holds it under `block` until an operator unblocks or discards it.
-- SECURITY DEFINER: the runtime roles (docs/security.md) need no rights on the key table
-- nor on the columns the trigger writes; an accept only inserts its row.
CREATE FUNCTION inbox_receipts_key_order()
RETURNS trigger
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path FROM CURRENT
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
        INSERT INTO inbox_ordering_keys AS k (consumer, ordering_key, head_id)
        VALUES (NEW.consumer, NEW.ordering_key, NEW.id)
        ON CONFLICT (consumer, ordering_key)
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
          AND k.ordering_key = receipt.ordering_key
        RETURNING k.head_id INTO head;
        IF head IS NULL THEN
            DELETE FROM inbox_ordering_keys
            WHERE consumer = receipt.consumer
              AND ordering_key = receipt.ordering_key;
        END IF;
    ELSIF holds AND NEW.status IN ('RETRYABLE', 'DEAD') THEN
        -- The head failed: its key is blocked from now until the head lets go.
        UPDATE inbox_ordering_keys
        SET blocked_since = pg_catalog.now()
        WHERE consumer = NEW.consumer
          AND ordering_key = NEW.ordering_key
          AND head_id = NEW.id
          AND blocked_since IS NULL;
    END IF;
    RETURN NULL;
END;
$$;

-- WHEN keeps unordered receipts, the claim's PENDING -> PROCESSING step and the trigger's
-- own steps to and from WAITING (a WAITING receipt only ever moves by a promotion) from
-- ever calling the function.
CREATE TRIGGER inbox_receipts_key_order_insert
    AFTER INSERT ON inbox_receipts
    FOR EACH ROW
    WHEN (NEW.ordering_key IS NOT NULL)
    EXECUTE FUNCTION inbox_receipts_key_order();

CREATE TRIGGER inbox_receipts_key_order_update
    AFTER UPDATE OF status, key_released_at, discarded_at ON inbox_receipts
    FOR EACH ROW
    WHEN (NEW.ordering_key IS NOT NULL
          AND NEW.status NOT IN ('PROCESSING', 'WAITING')
          AND OLD.status <> 'WAITING'
          AND (OLD.status IS DISTINCT FROM NEW.status OR OLD.key_released_at IS DISTINCT FROM NEW.key_released_at
               OR OLD.discarded_at IS DISTINCT FROM NEW.discarded_at))
    EXECUTE FUNCTION inbox_receipts_key_order();

CREATE TRIGGER inbox_receipts_key_order_delete
    AFTER DELETE ON inbox_receipts
    FOR EACH ROW
    WHEN (OLD.ordering_key IS NOT NULL)
    EXECUTE FUNCTION inbox_receipts_key_order();

-- Callable by the triggers only: as the owner's function it could change any receipt.
REVOKE ALL ON FUNCTION inbox_receipts_key_order() FROM PUBLIC;
