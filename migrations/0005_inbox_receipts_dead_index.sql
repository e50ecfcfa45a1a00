-- boxcar:no-transaction
-- boxcar:compatible-with 4
-- DEAD records by consumer and age: `dead list` filters and the DEAD backlog gauge,
-- without touching COMPLETED rows. Built CONCURRENTLY, one index per step, so accept(),
-- claims and completions keep writing (docs/development.md, "Add a migration"). Any
-- binary that knows 0004 runs correctly with or without it: compatible with 4.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_dead
    ON inbox_receipts (consumer, updated_at)
    WHERE status = 'DEAD';
