-- boxcar:compatible-with 16
-- The inbox is a queue table: every receipt leaves two dead row versions (claim and
-- completion) and, once retention deletes it, a third. At 5,000 msg/s the default
-- autovacuum throttle (cost delay 2 ms) did not finish one vacuum of a 1 GB inbox in 150 s,
-- and the heap grew from 0.64 to 1.58 GB; unthrottled, dead tuples stayed bounded and the
-- heap stopped growing (docs/benchmarks.md, "inbox retention by bounded deletes"). So its
-- vacuum runs without the cost delay. A storage parameter only: SHARE UPDATE EXCLUSIVE for
-- an instant, no rewrite. To share I/O more politely on a busy shared cluster:
-- ALTER TABLE inbox_receipts RESET (autovacuum_vacuum_cost_delay) (docs/operations.md).
ALTER TABLE inbox_receipts SET (autovacuum_vacuum_cost_delay = 0);
