-- boxcar:compatible-with 11
-- Per-key order from emit to topic (docs/publisher.md, "Ordering"; docs/schema.md, "Key
-- order"). Of the events of one (topic, message_key) that take part, only the oldest
-- unfinished one (the head) is ever PENDING, PUBLISHING or RETRYABLE; the others are
-- WAITING, which the publisher's claim (outbox_events_due: PENDING, RETRYABLE) never sees.
-- When the head is PUBLISHED or DEAD, the next one in key_seq order becomes PENDING. So the
-- claim itself, and every publisher, needs no change: however many publishers run, and
-- however often a delivery fails (RETRYABLE keeps its key), a key has one event in flight.
--
-- Compatible with 11: a binary that knows only 0011 inserts without `ordered` (default
-- false: its events are not ordered, as before), claims only PENDING/RETRYABLE and moves events
-- between statuses through the triggers below; it leaves WAITING out of its status counts.
--
-- The functions run as the invoker (the emitting, publishing or operator role, granted on
-- outbox_ordering_keys by apply_roles) with their search_path pinned to pg_catalog, this
-- schema, pg_temp (set at the end of this file): built-ins come from pg_catalog and the
-- tables from this schema, whatever the caller's search_path (docs/security.md, section 1).
-- Built-ins are also written pg_catalog.<name>.

-- ordered: whether the event takes part in its key's order (EmitOptions::ordered with an
--          explicit key). Constant default false: no table rewrite, and an older emitter's
--          events stay unordered, as do the rows that existed before this migration.
-- key_seq: the event's position in its key, drawn from outbox_ordering_keys.next_seq under
--          the key row's lock when it entered the key (its emit, or an operator's requeue
--          of it when DEAD); NULL for an event that never took part. Emitters of one key
--          hold that row's lock until they commit, so positions follow commit order.
ALTER TABLE outbox_events
    ADD COLUMN ordered boolean NOT NULL DEFAULT false,
    ADD COLUMN key_seq bigint;

-- WAITING: behind the head of its key. NOT VALID: the new check accepts every status the
-- old one did, so there is nothing to check in the existing rows; new and updated rows
-- are checked. Dropped and added in one statement: one ACCESS EXCLUSIVE instant.
ALTER TABLE outbox_events
    DROP CONSTRAINT outbox_events_status,
    ADD CONSTRAINT outbox_events_status CHECK (
        status IN ('PENDING', 'WAITING', 'PUBLISHING', 'RETRYABLE', 'PUBLISHED', 'DEAD')) NOT VALID,
    ADD CONSTRAINT outbox_events_waiting_position CHECK (status <> 'WAITING' OR key_seq IS NOT NULL) NOT VALID;

-- One row per key with unfinished ordered events (PENDING, WAITING, PUBLISHING, RETRYABLE),
-- deleted when the last of them finishes: the table is the size of the backlog's keys.
-- unfinished: how many of the key's events are unfinished.
-- next_seq:   the key_seq the next event to enter the key takes. It restarts at 1 when the
--             row is recreated; positions are only ever compared between unfinished events,
--             which all entered during the row's current life.
-- unfinished is 0 only between the decrement of its last event and the row's deletion,
-- in the same statement. Updated by every emit and every publish of its key: room for HOT
-- updates (fillfactor) and an eager autovacuum, like outbox_events.
CREATE TABLE outbox_ordering_keys (
    topic       text   NOT NULL,
    message_key text   NOT NULL,
    unfinished  bigint NOT NULL,
    next_seq    bigint NOT NULL,
    PRIMARY KEY (topic, message_key),
    CONSTRAINT outbox_ordering_keys_counts CHECK (unfinished >= 0 AND next_seq > 1)
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02
);

-- An event enters its key: at its emit (BEFORE INSERT, so its key_seq and WAITING are part
-- of the row as inserted: one row version, no second write), or when an operator requeues
-- it from DEAD (`boxcar dead retry`, BEFORE UPDATE): then at the end, with a fresh key_seq,
-- as a new emission in the key's order at the time of the requeue. The upsert locks the key row
-- until the emitting transaction ends: a concurrent emitter of the same key waits for that
-- commit (or rollback) and then sees the row as committed, so positions follow commit
-- order. The outbox insert never uses ON CONFLICT (the event id is fresh): a row that
-- reaches this trigger is inserted, or its statement fails and undoes this too.
CREATE FUNCTION outbox_key_order_enter()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY INVOKER
AS $fn$
DECLARE
    held bigint;
    seq bigint;
BEGIN
    INSERT INTO outbox_ordering_keys AS k (topic, message_key, unfinished, next_seq)
    VALUES (NEW.topic, NEW.message_key, 1, 2)
    ON CONFLICT (topic, message_key) DO UPDATE
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

-- An event stops holding its key (PUBLISHED or DEAD, or deleted while unfinished): count it
-- out, delete the key row at 0, and when it was the head, make the next WAITING event (the
-- smallest key_seq) PENDING and due now. The promotion is a statement of its own after the
-- key row's lock was taken: under READ COMMITTED each statement of a volatile function
-- takes a fresh snapshot, which therefore sees every WAITING event whose emitter committed
-- before that lock was granted (an emitter still open holds the lock, so this waits for
-- it). DEAD releases the key: a DEAD event is a gap in its key's order, never a reorder.
--
-- For the events of one UPDATE statement (a publisher marks a whole batch), all at once:
-- five statements per batch instead of two or three per event (a batch of 1,000 marked in
-- about a seventh of the time). Old and new rows come from the statement's transition tables.
CREATE FUNCTION outbox_key_order_leave_all()
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
    UPDATE outbox_events AS e
    SET status = 'PENDING',
        available_at = pg_catalog.now(),
        updated_at = pg_catalog.now()
    FROM (SELECT (SELECT w.id
                  FROM outbox_events AS w
                  WHERE w.topic = t.topic
                    AND w.message_key = t.message_key
                    AND w.status = 'WAITING'
                  ORDER BY w.key_seq
                  LIMIT 1) AS id
          FROM ROWS FROM (pg_catalog.unnest(topics), pg_catalog.unnest(message_keys), pg_catalog.unnest(promote))
               AS t(topic, message_key, promote)
          WHERE t.promote) AS next
    WHERE e.id = next.id;
    RETURN NULL;
END
$fn$;

-- The same for one deleted event (row by row: a statement-level DELETE trigger would copy
-- every row retention deletes into its transition table, while this one's WHEN is false
-- for all of them, which are PUBLISHED).
CREATE FUNCTION outbox_key_order_leave()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY INVOKER
AS $fn$
DECLARE
    remaining bigint;
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
        UPDATE outbox_events
        SET status = 'PENDING',
            available_at = pg_catalog.now(),
            updated_at = pg_catalog.now()
        WHERE id = (SELECT w.id
                    FROM outbox_events AS w
                    WHERE w.topic = OLD.topic
                      AND w.message_key = OLD.message_key
                      AND w.status = 'WAITING'
                    ORDER BY w.key_seq
                    LIMIT 1);
    END IF;
    RETURN NULL;
END
$fn$;

-- The triggers act only on events that take part: `ordered` at the emit, key_seq ever
-- since (NULL for the rows from before this migration, and for opted-out events). The
-- unfinished statuses are PENDING, WAITING, PUBLISHING and RETRYABLE: a RETRYABLE head
-- keeps its key through its backoff.
CREATE TRIGGER outbox_events_key_order_enter
    BEFORE INSERT ON outbox_events
    FOR EACH ROW
    WHEN (NEW.ordered AND NEW.status = 'PENDING')
    EXECUTE FUNCTION outbox_key_order_enter();

CREATE TRIGGER outbox_events_key_order_reenter
    BEFORE UPDATE OF status ON outbox_events
    FOR EACH ROW
    WHEN (OLD.key_seq IS NOT NULL
          AND OLD.status IN ('PUBLISHED', 'DEAD')
          AND NEW.status IN ('PENDING', 'RETRYABLE'))
    EXECUTE FUNCTION outbox_key_order_enter();

-- Statement level with transition tables, so it cannot name a column or filter with WHEN:
-- it runs after every UPDATE of outbox_events (a claim finds nothing leaving in a few
-- hundred microseconds), and the statement's rows are copied into its transition tables.
CREATE TRIGGER outbox_events_key_order_leave
    AFTER UPDATE ON outbox_events
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_key_order_leave_all();

CREATE TRIGGER outbox_events_key_order_delete
    AFTER DELETE ON outbox_events
    FOR EACH ROW
    WHEN (OLD.key_seq IS NOT NULL
          AND OLD.status IN ('PENDING', 'WAITING', 'PUBLISHING', 'RETRYABLE'))
    EXECUTE FUNCTION outbox_key_order_leave();

-- TRUNCATE fires no row trigger: emptying the events empties their keys.
CREATE FUNCTION outbox_key_order_truncate()
    RETURNS trigger
    LANGUAGE plpgsql
    SECURITY INVOKER
AS $fn$
BEGIN
    DELETE FROM outbox_ordering_keys;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER outbox_events_key_order_truncate
    AFTER TRUNCATE ON outbox_events
    FOR EACH STATEMENT
    EXECUTE FUNCTION outbox_key_order_truncate();

-- Pin each function's search_path: the runner set this transaction's to this schema; put
-- pg_catalog first and pg_temp last (set_config(..., true) lasts until the migration's
-- transaction ends), then capture it (FROM CURRENT). Done last: with pg_catalog first, a
-- CREATE would target pg_catalog.
SELECT pg_catalog.set_config('search_path',
    'pg_catalog, ' || pg_catalog.quote_ident(pg_catalog.current_schema()) || ', pg_temp', true);
ALTER FUNCTION outbox_key_order_enter() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_key_order_leave() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_key_order_leave_all() SET search_path FROM CURRENT;
ALTER FUNCTION outbox_key_order_truncate() SET search_path FROM CURRENT;
