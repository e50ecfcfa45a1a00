-- boxcar:no-transaction
-- boxcar:compatible-with 11
-- The WAITING events of a key in key order (0013_outbox_key_order.sql): the promotion of a
-- key's next event when its head is PUBLISHED or DEAD is one descent of this index. Only
-- WAITING rows are in it. Built CONCURRENTLY in its own step like 0005.
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_events_waiting
    ON outbox_events (topic, message_key, key_seq)
    WHERE status = 'WAITING';
