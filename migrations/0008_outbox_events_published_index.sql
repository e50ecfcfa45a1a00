-- boxcar:no-transaction
-- boxcar:compatible-with 4
-- Retention: `purge` deletes the oldest PUBLISHED events in bounded batches. Built
-- CONCURRENTLY in its own step like 0005.
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_events_published
    ON outbox_events (published_at)
    WHERE status = 'PUBLISHED';
