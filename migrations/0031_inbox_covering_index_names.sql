-- boxcar:compatible-with 26
-- Step 5 of 5: the covering indexes of 0027 and 0028 take the names of the indexes they
-- replaced, which the docs, operators' dashboards and EXPLAIN outputs know. A rename takes
-- SHARE UPDATE EXCLUSIVE on the index only, for an instant: readers and writers of
-- inbox_receipts go on. No statement names an index: compatible with 26.
ALTER INDEX inbox_receipts_claimable_covering RENAME TO inbox_receipts_claimable;
ALTER INDEX inbox_receipts_dead_covering RENAME TO inbox_receipts_dead;
