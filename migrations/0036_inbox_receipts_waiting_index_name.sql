-- boxcar:compatible-with 34
-- Ordering keys are scoped, step 4 of 4: the scoped index takes the name of the one it
-- replaced, which the docs and EXPLAIN outputs know. A rename takes SHARE UPDATE EXCLUSIVE
-- on the index only, for an instant. No statement names an index: compatible with 34.
ALTER INDEX inbox_receipts_waiting_scoped RENAME TO inbox_receipts_waiting;
