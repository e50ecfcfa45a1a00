-- Crash-loop isolation (docs/worker.md, "Attempt accounting and the suspect lane"): a
-- receipt whose lease expired without an outcome is a suspect and runs alone; only a
-- suspect whose lease expires after it started alone takes a crash strike. See
-- docs/schema.md for each column; the index of due suspects is 0010. No compatibility
-- marker: a binary that knows only 0008 would complete a receipt with solo_started_at
-- still set, which the check below refuses, so old replicas must not run against it.

-- suspect:         its last claim ended in lease expiry; it is only claimed in solo mode
--                  (no other message in flight in the claiming worker process).
-- solo_started_at: set in an autocommit statement when a suspect's solo run starts, just
--                  before its handler transaction; NULL otherwise. A lease that expires
--                  while it is set is a crash strike; without it, nothing is charged.
-- crash_strikes:   how many times a solo run of this receipt ended in lease expiry.
-- Constant defaults: no table rewrite on PostgreSQL 11+.
ALTER TABLE inbox_receipts
    ADD COLUMN suspect boolean NOT NULL DEFAULT false,
    ADD COLUMN solo_started_at timestamptz,
    ADD COLUMN crash_strikes integer NOT NULL DEFAULT 0;

-- A solo start only exists on a suspect's live claim. NOT VALID: existing rows (all with
-- the defaults) are not scanned under the table lock; new and updated rows are checked.
ALTER TABLE inbox_receipts
    ADD CONSTRAINT inbox_receipts_solo_start CHECK (
        solo_started_at IS NULL OR (suspect AND status = 'PROCESSING')) NOT VALID,
    ADD CONSTRAINT inbox_receipts_crash_strikes CHECK (crash_strikes >= 0) NOT VALID;
