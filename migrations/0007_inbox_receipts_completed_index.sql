-- boxcar:no-transaction
-- boxcar:compatible-with 4
-- Retention: `purge` deletes the oldest COMPLETED receipts in bounded batches. Built
-- CONCURRENTLY in its own step like 0005.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_completed
    ON inbox_receipts (completed_at)
    WHERE status = 'COMPLETED';
