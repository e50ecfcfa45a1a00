-- Operator recovery, retention and cheap backlog metrics. See docs/schema.md and
-- docs/operations.md.

-- Who replayed or discarded a DEAD record, when, and how often it was replayed.
ALTER TABLE inbox_receipts
    ADD COLUMN replay_count integer NOT NULL DEFAULT 0,
    ADD COLUMN last_replayed_at timestamptz,
    ADD COLUMN last_replayed_by text,
    ADD COLUMN discarded_at timestamptz,
    ADD COLUMN discarded_by text;
ALTER TABLE outbox_events
    ADD COLUMN replay_count integer NOT NULL DEFAULT 0,
    ADD COLUMN last_replayed_at timestamptz,
    ADD COLUMN last_replayed_by text,
    ADD COLUMN discarded_at timestamptz,
    ADD COLUMN discarded_by text;

-- DEAD records by consumer and age: `dead list` filters and the DEAD backlog gauge,
-- without touching COMPLETED rows.
CREATE INDEX inbox_receipts_dead
    ON inbox_receipts (consumer, updated_at)
    WHERE status = 'DEAD';
CREATE INDEX outbox_events_dead
    ON outbox_events (updated_at)
    WHERE status = 'DEAD';

-- Retention: `purge` deletes the oldest finished rows in bounded batches.
CREATE INDEX inbox_receipts_completed
    ON inbox_receipts (completed_at)
    WHERE status = 'COMPLETED';
CREATE INDEX outbox_events_published
    ON outbox_events (published_at)
    WHERE status = 'PUBLISHED';
