-- boxcar:compatible-with 16
-- boxcar:previous-checksum 744a5a196cedb0a0c254988c5832657fadaee652598d3d83270a75826d7988a6
-- (this file before its comments were reworded: the same statements)
-- The key-order functions of 0013 on the partitioned outbox (0019). They found each key's
-- next WAITING event and updated it by `id` alone; `id` is not the partition key, so every
-- promotion probed the `id` index of every partition (the pattern the publisher's claim
-- no longer has: docs/benchmarks.md, "Generic plans"). They now take the next event's
-- `event_id` (the partition key) with its `id` and update by both, so each update reads
-- the one partition holding the event (run-time pruning).
--
-- Bodies only: same names, signatures, triggers, SECURITY INVOKER and grants; the rows
-- and statuses they write are those of 0013. Compatible with 16, like 0019 before it.

CREATE OR REPLACE FUNCTION outbox_key_order_leave_all()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY INVOKER
AS $fn$
DECLARE
    topics text[];
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
    -- Per key, in (topic, message_key) byte order: how many of its events left, and whether its
    -- head was one of them. Run with EXECUTE, planned for this statement's row counts: a
    -- cached plan made for the few rows of an earlier statement joins the two transition
    -- tables with a nested loop, quadratic in a batch of 1,000.
    EXECUTE $sql$
        SELECT pg_catalog.array_agg(l.topic ORDER BY l.topic COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.message_key ORDER BY l.topic COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.events ORDER BY l.topic COLLATE "C", l.message_key COLLATE "C"),
               pg_catalog.array_agg(l.head_left ORDER BY l.topic COLLATE "C", l.message_key COLLATE "C")
        FROM (SELECT o.topic,
                     o.message_key,
                     pg_catalog.count(*) AS events,
                     pg_catalog.bool_or(o.status <> 'WAITING') AS head_left
              FROM old_rows AS o
              JOIN new_rows AS n
                ON n.id = o.id
              WHERE o.key_seq IS NOT NULL
                AND o.status IN ('PENDING', 'WAITING', 'PUBLISHING', 'RETRYABLE')
                AND n.status IN ('PUBLISHED', 'DEAD')
              GROUP BY o.topic, o.message_key) AS l
    $sql$
    INTO topics, message_keys, counts, heads_left;
    IF topics IS NULL THEN
        RETURN NULL;
    END IF;
    -- Lock the key rows in that order (the sort runs below the row locks): an emitting
    -- transaction that takes its keys in the same order (emits them sorted by topic, then
    -- key, as bytes) never deadlocks with this one.
    PERFORM 1
    FROM outbox_ordering_keys AS k
    JOIN ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(message_keys)) WITH ORDINALITY
         AS t(topic, message_key, position)
      ON k.topic = t.topic
     AND k.message_key = t.message_key
    ORDER BY t.position
    FOR NO KEY UPDATE OF k;
    WITH counted AS (
        UPDATE outbox_ordering_keys AS k
        SET unfinished = k.unfinished - t.events
        FROM ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(message_keys), pg_catalog.unnest(counts),
                        pg_catalog.unnest(heads_left)) AS t(topic, message_key, events, head_left)
        WHERE k.topic = t.topic
          AND k.message_key = t.message_key
        RETURNING k.topic, k.message_key, t.head_left AND k.unfinished > 0::bigint AS promote
    )
    SELECT pg_catalog.array_agg(c.topic), pg_catalog.array_agg(c.message_key), pg_catalog.array_agg(c.promote)
    INTO topics, message_keys, promote
    FROM counted AS c;
    IF topics IS NULL THEN
        RETURN NULL;
    END IF;
    DELETE FROM outbox_ordering_keys AS k
    USING ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(message_keys)) AS t(topic, message_key)
    WHERE k.topic = t.topic
      AND k.message_key = t.message_key
      AND k.unfinished = 0::bigint;
    -- Each key's next event by its partition key and id: the nested loop's inner side is
    -- pruned at run time to the partition that holds it.
    UPDATE outbox_events AS e
    SET status = 'PENDING',
        available_at = pg_catalog.now(),
        updated_at = pg_catalog.now()
    FROM ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(message_keys), pg_catalog.unnest(promote))
         AS t(topic, message_key, promote)
    CROSS JOIN LATERAL (SELECT w.event_id, w.id
                        FROM outbox_events AS w
                        WHERE w.topic = t.topic
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
    SECURITY INVOKER
AS $fn$
DECLARE
    remaining bigint;
    next_event_id uuid;
    next_id bigint;
BEGIN
    UPDATE outbox_ordering_keys
    SET unfinished = unfinished - 1::bigint
    WHERE topic = OLD.topic
      AND message_key = OLD.message_key
    RETURNING unfinished INTO remaining;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF remaining <= 0::bigint THEN
        DELETE FROM outbox_ordering_keys
        WHERE topic = OLD.topic
          AND message_key = OLD.message_key;
    ELSIF OLD.status <> 'WAITING' THEN
        SELECT w.event_id, w.id
        INTO next_event_id, next_id
        FROM outbox_events AS w
        WHERE w.topic = OLD.topic
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

-- CREATE OR REPLACE resets each function's settings: pin search_path again as 0013 did
-- (pg_catalog first, this schema, pg_temp last; last in the file, since with pg_catalog
-- first a CREATE would target pg_catalog).
SELECT pg_catalog.set_config('search_path',
    'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION outbox_key_order_leave() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_key_order_leave_all() SET search_path FROM CURRENT;
