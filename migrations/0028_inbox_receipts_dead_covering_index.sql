-- boxcar:no-transaction
-- boxcar:compatible-with 26
-- boxcar:previous-checksum 7db73dd36c250bea51cd7fffae35e8a53f0d7a77ab9c32ed6cd84e105cae44d5
-- (this file before its comments were reworded: the same statements)
-- The DEAD receipts' index with discarded_at INCLUDEd, step 2 of 5. The DEAD gauge counts
-- each consumer's DEAD receipts not discarded (discarded_at IS NULL), up to a cap, in
-- inbox_receipts_dead's order, which fetched every row from the heap for discarded_at; with
-- it in the index the count is an index-only scan (2 buffers against 9-12 beside retained
-- rows; docs/benchmarks.md, "Covering indexes for the backlog counts"). The key and
-- predicate are inbox_receipts_dead's (`dead list/retry/discard` and the operator views use it as before).
-- 0030 drops the old index and 0031 gives this one its name: compatible with 26.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_dead_covering
    ON inbox_receipts (consumer, updated_at) INCLUDE (discarded_at)
    WHERE status = 'DEAD';
