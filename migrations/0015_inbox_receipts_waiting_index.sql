-- boxcar:no-transaction
-- boxcar:compatible-with 12
-- The receipts waiting behind their key's head, in key order: the head's successor is
-- one index probe when a head finishes (0012, the key-order trigger). Empty unless a consumer
-- orders by key. Built CONCURRENTLY in its own step; until it exists the search scans the
-- consumer's rows, so 0012's triggers work without it: compatible with 12.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_waiting
    ON inbox_receipts (consumer, ordering_key, key_seq NULLS FIRST, id)
    WHERE status = 'WAITING';
