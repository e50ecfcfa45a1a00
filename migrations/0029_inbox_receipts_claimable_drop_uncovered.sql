-- boxcar:no-transaction
-- boxcar:compatible-with 26
-- Step 3 of 5: inbox_receipts_claimable_covering (0027) serves everything the index of
-- 0001 served, so that one goes: one index entry fewer per accept and per return to
-- PENDING/RETRYABLE. CONCURRENTLY: it waits for the transactions using the table instead
-- of locking writers out. IF EXISTS: a run interrupted after the drop and before its record
-- goes on.
DROP INDEX CONCURRENTLY IF EXISTS inbox_receipts_claimable;
