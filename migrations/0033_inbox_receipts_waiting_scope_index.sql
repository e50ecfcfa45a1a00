-- boxcar:no-transaction
-- boxcar:compatible-with 32
-- Ordering keys are scoped, step 1 of 4 (docs/ordering.md, "Keys are scoped"): the
-- receipts waiting behind their key's head, per consumer, scope and key, in key order.
-- 0034 moves each key's head by (consumer, scope, key), and this index keeps that one
-- descent whatever other scopes wait on the same key text: without the scope in the index,
-- one tenant's backlog on key 42 would be walked past by every promotion of another
-- tenant's key 42. Built CONCURRENTLY: writers of inbox_receipts go on. Until 0034 no
-- statement needs it: compatible with 32.
CREATE INDEX CONCURRENTLY IF NOT EXISTS inbox_receipts_waiting_scoped
    ON inbox_receipts (consumer, scope_kind, scope_id, ordering_key, key_seq NULLS FIRST, id)
    WHERE status = 'WAITING';
