-- boxcar:no-transaction
-- boxcar:compatible-with 34
-- Ordering keys are scoped, step 3 of 4: no statement looks up waiting receipts by
-- (consumer, key) alone any more (0034), so 0015's index goes: one index entry fewer for
-- every receipt that waits. CONCURRENTLY: it waits for the transactions using the table
-- instead of locking writers out. A binary that knows 0034 uses the scoped index:
-- compatible with 34.
DROP INDEX CONCURRENTLY IF EXISTS inbox_receipts_waiting;
