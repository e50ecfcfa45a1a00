-- boxcar:no-transaction
-- boxcar:compatible-with 15
-- Claimable receipts of a consumer by scope, oldest due first within each: the fair
-- claim's loose index scan over scopes and its per-scope picks (docs/worker.md, "Claims";
-- docs/schema.md). Built CONCURRENTLY in its own step like 0010. A binary that predates
-- it never reads it, so the index alone breaks nothing older: compatible with 15.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_claimable_scope
    ON inbox_receipts (consumer, scope_kind, scope_id, available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');
