-- boxcar:no-transaction
-- boxcar:compatible-with 26
-- The DEAD receipts' index with discarded_at INCLUDEd, step 2 of 5. The DEAD gauge counts
-- each consumer's DEAD receipts not discarded (discarded_at IS NULL), up to a cap, in
-- inbox_receipts_dead's order, which fetched every row from the heap for discarded_at; with
-- it in the index the count is an index-only scan (2 buffers against 9-12 beside retained
-- rows, docs/benchmarks.md, "Twenty-third session"). The key and predicate are
-- inbox_receipts_dead's (`dead list/retry/discard` and the operator views use it as before).
-- 0030 drops the old index and 0031 gives this one its name: compatible with 26.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_dead_covering
    ON inbox_receipts (consumer, updated_at) INCLUDE (discarded_at)
    WHERE status = 'DEAD';
