-- boxcar:compatible-with 36
-- Outbox keys are scoped, step 1 of 4 (docs/publisher.md, "Ordering"; docs/schema.md, "Key
-- order"). A key row was (topic, message_key): two tenants that emit with the same key on
-- one topic (both have an order 42) waited for each other's emitting transactions to
-- commit, and one tenant's event retrying at the head of the key held the other tenant's
-- events back until it was PUBLISHED or DEAD. A key is now (topic, tenant_scope,
-- tenant_id, message_key): each scope has its own keys and order. Kafka still gets both
-- tenants' events of one key in one partition; what a consumer relies on, the order of a
-- tenant's events of a key, holds as before.
--
-- The key table can no longer be written by the runtime roles (docs/security.md, section
-- 2): the four key-order functions become SECURITY DEFINER, so they run as the owner,
-- whoever's statement fires them, and core/src/roles_queries.hpp revokes the worker's,
-- publisher's and operator's grants on outbox_ordering_keys. Their search_path stays
-- pinned with pg_catalog first.
--
-- Existing rows: the key table is rebuilt from the unfinished ordered events, one row per
-- scoped key, each keeping its key's next position. A scope whose events were all WAITING
-- behind another scope's head gets its first one (in the old key order) made PENDING.
--
-- Locks: outbox_events in SHARE mode first, then the key table, for the reason 0034 gives
-- (a key-order trigger already running keeps its old body, and must not run a statement of
-- it against the scoped table): emits, claims and marks wait for this transaction, which
-- reads the unfinished ordered events through the partial indexes of unfinished events
-- (the backlog, never the retained rows); readers go on.
--
-- The promotions look a key's next event up by (topic, tenant_scope, tenant_id,
-- message_key, key_seq): 0038-0040 build that index (the three steps of 0023-0025) and drop
-- the unscoped one. Until then a promotion reads the unscoped index and filters by scope.
--
-- A binary that knows 0036 emits, publishes and requeues through the same triggers (its
-- statements never name the key table): compatible with 36.

LOCK TABLE outbox_events IN SHARE MODE;
LOCK TABLE outbox_ordering_keys IN ACCESS EXCLUSIVE MODE;

ALTER TABLE outbox_ordering_keys
    ADD COLUMN tenant_scope text,
    ADD COLUMN tenant_id text,
    DROP CONSTRAINT outbox_ordering_keys_pkey;

-- Rebuilt from the events: per scoped key, its unfinished ordered events (PENDING and
-- RETRYABLE through the due index, PUBLISHING through the leases index, WAITING through
-- the waiting index: the backlog, never the retained rows), and the next position of the
-- key it was part of.
WITH old AS (
    DELETE FROM outbox_ordering_keys
    RETURNING topic, message_key, next_seq
), unfinished AS (
    SELECT e.topic, e.tenant_scope, e.tenant_id, e.message_key
    FROM outbox_events AS e
    WHERE e.status IN ('PENDING', 'RETRYABLE')
      AND e.key_seq IS NOT NULL
    UNION ALL
    SELECT e.topic, e.tenant_scope, e.tenant_id, e.message_key
    FROM outbox_events AS e
    WHERE e.status = 'PUBLISHING'
      AND e.key_seq IS NOT NULL
    UNION ALL
    SELECT e.topic, e.tenant_scope, e.tenant_id, e.message_key
    FROM outbox_events AS e
    WHERE e.status = 'WAITING'
)
INSERT INTO outbox_ordering_keys (topic, tenant_scope, tenant_id, message_key, unfinished, next_seq)
SELECT u.topic, u.tenant_scope, u.tenant_id, u.message_key, pg_catalog.count(*), pg_catalog.max(o.next_seq)
FROM unfinished AS u
JOIN old AS o
  ON o.topic = u.topic
 AND o.message_key = u.message_key
GROUP BY u.topic, u.tenant_scope, u.tenant_id, u.message_key;

ALTER TABLE outbox_ordering_keys
    ALTER COLUMN tenant_scope SET NOT NULL,
    ALTER COLUMN tenant_id SET NOT NULL,
    ADD PRIMARY KEY (topic, tenant_scope, tenant_id, message_key);

-- A scoped key whose events all wait (its head belonged to another scope) gets its first
-- one PENDING and due now. The statement-level trigger sees nothing leave its key.
UPDATE outbox_events AS e
SET status = 'PENDING',
    available_at = pg_catalog.now(),
    updated_at = pg_catalog.now()
FROM outbox_ordering_keys AS k
CROSS JOIN LATERAL (SELECT w.event_id, w.id
                    FROM outbox_events AS w
                    WHERE w.topic = k.topic
                      AND w.message_key = k.message_key
                      AND w.tenant_scope = k.tenant_scope
                      AND w.tenant_id = k.tenant_id
                      AND w.status = 'WAITING'
                    ORDER BY w.key_seq
                    LIMIT 1) AS next
WHERE NOT EXISTS (SELECT 1
                  FROM outbox_events AS h
                  WHERE h.topic = k.topic
                    AND h.message_key = k.message_key
                    AND h.tenant_scope = k.tenant_scope
                    AND h.tenant_id = k.tenant_id
                    AND h.key_seq IS NOT NULL
                    AND h.status IN ('PENDING', 'RETRYABLE', 'PUBLISHING'))
  AND e.event_id = next.event_id
  AND e.id = next.id;

-- An event enters its scoped key (0013's outbox_key_order_enter): at its emit, or when an
-- operator requeues it from DEAD. The upsert locks the key row until the emitting
-- transaction ends, so positions follow commit order.
CREATE OR REPLACE FUNCTION outbox_key_order_enter()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
AS $fn$
DECLARE
    held bigint;
    seq bigint;
BEGIN
    INSERT INTO outbox_ordering_keys AS k (topic, tenant_scope, tenant_id, message_key, unfinished, next_seq)
    VALUES (NEW.topic, NEW.tenant_scope, NEW.tenant_id, NEW.message_key, 1, 2)
    ON CONFLICT (topic, tenant_scope, tenant_id, message_key) DO UPDATE
        SET unfinished = k.unfinished + 1::bigint,
            next_seq = k.next_seq + 1::bigint
    RETURNING k.unfinished, k.next_seq - 1::bigint INTO held, seq;
    NEW.key_seq := seq;
    IF held > 1::bigint THEN
        NEW.status := 'WAITING';
    END IF;
    RETURN NEW;
END
$fn$;

-- The events of one UPDATE statement that stop holding their keys (PUBLISHED or DEAD), all
-- at once (0013, 0022), per scoped key.
CREATE OR REPLACE FUNCTION outbox_key_order_leave_all()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
AS $fn$
DECLARE
    topics text[];
    tenant_scopes text[];
    tenant_ids text[];
    message_keys text[];
    counts bigint[];
    heads_left boolean[];
    promote boolean[];
BEGIN
    -- Most UPDATEs settle nothing (a claim makes events PUBLISHING): one pass over new_rows.
    IF NOT EXISTS (SELECT 1
                   FROM new_rows AS n
                   WHERE n.key_seq IS NOT NULL
                     AND n.status IN ('PUBLISHED', 'DEAD')) THEN
        RETURN NULL;
    END IF;
    -- Per scoped key, in byte order: how many of its events left, and whether its head was
    -- one of them. EXECUTE: planned for this statement's row counts (0013).
    EXECUTE $sql$
        SELECT pg_catalog.array_agg(l.topic ORDER BY l.topic COLLATE "C", l.tenant_scope COLLATE "C",
                                    l.tenant_id COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.tenant_scope ORDER BY l.topic COLLATE "C", l.tenant_scope COLLATE "C",
                                    l.tenant_id COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.tenant_id ORDER BY l.topic COLLATE "C", l.tenant_scope COLLATE "C",
                                    l.tenant_id COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.message_key ORDER BY l.topic COLLATE "C", l.tenant_scope COLLATE "C",
                                    l.tenant_id COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.events ORDER BY l.topic COLLATE "C", l.tenant_scope COLLATE "C",
                                    l.tenant_id COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.head_left ORDER BY l.topic COLLATE "C", l.tenant_scope COLLATE "C",
                                    l.tenant_id COLLATE "C", l.message_key COLLATE "C")
        FROM (SELECT o.topic,
                     o.tenant_scope,
                     o.tenant_id,
                     o.message_key,
                     pg_catalog.count(*) AS events,
                     pg_catalog.bool_or(o.status <> 'WAITING') AS head_left
              FROM old_rows AS o
              JOIN new_rows AS n
                ON n.id = o.id
              WHERE o.key_seq IS NOT NULL
                AND o.status IN ('PENDING', 'WAITING', 'PUBLISHING', 'RETRYABLE')
                AND n.status IN ('PUBLISHED', 'DEAD')
              GROUP BY o.topic, o.tenant_scope, o.tenant_id, o.message_key) AS l
    $sql$
    INTO topics, tenant_scopes, tenant_ids, message_keys, counts, heads_left;
    IF topics IS NULL THEN
        RETURN NULL;
    END IF;
    -- Lock the key rows in that order: an emitting transaction that takes its keys in the
    -- same order never deadlocks with this one.
    PERFORM 1
    FROM outbox_ordering_keys AS k
    JOIN ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(tenant_scopes), pg_catalog.unnest(tenant_ids),
                    pg_catalog.unnest(message_keys)) WITH ORDINALITY
         AS t(topic, tenant_scope, tenant_id, message_key, position)
      ON k.topic = t.topic
     AND k.tenant_scope = t.tenant_scope
     AND k.tenant_id = t.tenant_id
     AND k.message_key = t.message_key
    ORDER BY t.position
    FOR NO KEY UPDATE OF k;
    WITH counted AS (
        UPDATE outbox_ordering_keys AS k
        SET unfinished = k.unfinished - t.events
        FROM ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(tenant_scopes), pg_catalog.unnest(tenant_ids),
                        pg_catalog.unnest(message_keys), pg_catalog.unnest(counts), pg_catalog.unnest(heads_left))
             AS t(topic, tenant_scope, tenant_id, message_key, events, head_left)
        WHERE k.topic = t.topic
          AND k.tenant_scope = t.tenant_scope
          AND k.tenant_id = t.tenant_id
          AND k.message_key = t.message_key
        RETURNING k.topic, k.tenant_scope, k.tenant_id, k.message_key,
                  t.head_left AND k.unfinished > 0::bigint AS promote
    )
    SELECT pg_catalog.array_agg(c.topic), pg_catalog.array_agg(c.tenant_scope), pg_catalog.array_agg(c.tenant_id),
           pg_catalog.array_agg(c.message_key), pg_catalog.array_agg(c.promote)
    INTO topics, tenant_scopes, tenant_ids, message_keys, promote
    FROM counted AS c;
    IF topics IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM outbox_ordering_keys AS k
    USING ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(tenant_scopes), pg_catalog.unnest(tenant_ids),
                     pg_catalog.unnest(message_keys)) AS t(topic, tenant_scope, tenant_id, message_key)
    WHERE k.topic = t.topic
      AND k.tenant_scope = t.tenant_scope
      AND k.tenant_id = t.tenant_id
      AND k.message_key = t.message_key
      AND k.unfinished = 0::bigint;
    -- Each key's next event by its partition key and id: the nested loop's inner side is
    -- pruned at run time to the partition that holds it.
    UPDATE outbox_events AS e
    SET status = 'PENDING',
        available_at = pg_catalog.now(),
        updated_at = pg_catalog.now()
    FROM ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(tenant_scopes), pg_catalog.unnest(tenant_ids),
                    pg_catalog.unnest(message_keys), pg_catalog.unnest(promote))
         AS t(topic, tenant_scope, tenant_id, message_key, promote)
    CROSS JOIN LATERAL (SELECT w.event_id, w.id
                        FROM outbox_events AS w
                        WHERE w.topic = t.topic
                          AND w.tenant_scope = t.tenant_scope
                          AND w.tenant_id = t.tenant_id
                          AND w.message_key = t.message_key
                          AND w.status = 'WAITING'
                        ORDER BY w.key_seq
                        LIMIT 1) AS next
    WHERE t.promote
      AND e.event_id = next.event_id
      AND e.id = next.id;
    RETURN NULL;
END
$fn$;

-- The same for one deleted event (row by row: see 0013).
CREATE OR REPLACE FUNCTION outbox_key_order_leave()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
AS $fn$
DECLARE
    remaining bigint;
    next_event_id uuid;
    next_id bigint;
BEGIN
    UPDATE outbox_ordering_keys
    SET unfinished = unfinished - 1::bigint
    WHERE topic = OLD.topic
      AND tenant_scope = OLD.tenant_scope
      AND tenant_id = OLD.tenant_id
      AND message_key = OLD.message_key
    RETURNING unfinished INTO remaining;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF remaining <= 0::bigint THEN
        DELETE FROM outbox_ordering_keys
        WHERE topic = OLD.topic
          AND tenant_scope = OLD.tenant_scope
          AND tenant_id = OLD.tenant_id
          AND message_key = OLD.message_key;
    ELSIF OLD.status <> 'WAITING' THEN
        SELECT w.event_id, w.id
        INTO next_event_id, next_id
        FROM outbox_events AS w
        WHERE w.topic = OLD.topic
          AND w.tenant_scope = OLD.tenant_scope
          AND w.tenant_id = OLD.tenant_id
          AND w.message_key = OLD.message_key
          AND w.status = 'WAITING'
        ORDER BY w.key_seq
        LIMIT 1;
        IF FOUND THEN
            UPDATE outbox_events
            SET status = 'PENDING',
                available_at = pg_catalog.now(),
                updated_at = pg_catalog.now()
            WHERE event_id = next_event_id
              AND id = next_id;
        END IF;
    END IF;
    RETURN NULL;
END
$fn$;

-- TRUNCATE fires no row trigger: emptying the events empties their keys.
CREATE OR REPLACE FUNCTION outbox_key_order_truncate()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY DEFINER
AS $fn$
BEGIN
    DELETE FROM outbox_ordering_keys;
    RETURN NULL;
END
$fn$;

-- As the owner's functions they could change any key: only their triggers call them.
REVOKE ALL ON FUNCTION outbox_key_order_enter(), outbox_key_order_leave(), outbox_key_order_leave_all(),
                       outbox_key_order_truncate() FROM PUBLIC;

-- CREATE OR REPLACE resets a function's settings: pin each search_path again, pg_catalog
-- first, this schema, pg_temp last (last in the file: with pg_catalog first a CREATE would
-- target pg_catalog).
SELECT pg_catalog.set_config('search_path',
    'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION outbox_key_order_enter() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_key_order_leave() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_key_order_leave_all() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_key_order_truncate() SET search_path FROM CURRENT;
