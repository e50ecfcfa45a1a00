-- boxcar:no-transaction
-- boxcar:compatible-with 26
-- boxcar:previous-checksum a58cd5ed37f02f40174c5efe75c9aab3d8c0d30e1167905245f893fe3d7c8113
-- (this file before its comments were reworded: the same statements)
-- The claimable backlog's index with the status INCLUDEd, step 1 of 5 (docs/schema.md,
-- "Indexes and why each exists"). The backlog collector counts each consumer's PENDING and
-- RETRYABLE receipts, up to a cap, in inbox_receipts_claimable's order; the index holds
-- (consumer, available_at) only, so the count fetched every row from the heap to read its
-- status. Receipts accepted among retained COMPLETED ones land in the free space of many
-- pages, one page per row: 578 buffers for a 2,400-row backlog beside 300,000 retained rows
-- against 135 on an empty table (docs/benchmarks.md, "Covering indexes for the backlog
-- counts"). With status in the index the count is an index-only scan, 6 buffers in both. The key, order and
-- predicate are inbox_receipts_claimable's, so the claims use this index as they did that
-- one. Built CONCURRENTLY beside it; 0029 drops the old one and 0031 gives this one its
-- name. A binary that knows 0026 never names an index: compatible with 26.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_claimable_covering
    ON inbox_receipts (consumer, available_at) INCLUDE (status)
    WHERE status IN ('PENDING', 'RETRYABLE');
