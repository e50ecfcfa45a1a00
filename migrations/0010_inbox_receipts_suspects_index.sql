-- boxcar:no-transaction
-- boxcar:compatible-with 9
-- Due suspects of a consumer: the suspect lane's claim and its "any due?" probe
-- (0009_crash_isolation.sql). Tiny (suspects exist only after a worker died or hung), so
-- it costs the hot path nothing. Built CONCURRENTLY in its own step (docs/development.md,
-- "Add a migration"); a binary that knows 0009 runs correctly without it: compatible with 9.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_suspects
    ON inbox_receipts (consumer, available_at)
    WHERE suspect AND status IN ('PENDING', 'RETRYABLE');
