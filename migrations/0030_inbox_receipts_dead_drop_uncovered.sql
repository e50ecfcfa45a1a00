-- boxcar:no-transaction
-- boxcar:compatible-with 26
-- Step 4 of 5: inbox_receipts_dead_covering (0028) replaces the index of 0005, dropped
-- concurrently as in 0029.
DROP INDEX CONCURRENTLY IF EXISTS inbox_receipts_dead;
