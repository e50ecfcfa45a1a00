-- boxcar:compatible-with 10
-- The fleet's one backlog collection (docs/operations.md, "The backlog collector"): every
-- process used to count the whole backlog itself, so N processes cost N times, exactly
-- when the database is busiest. Now, per section, one process computes the figures and
-- stores them here; the others export what it stored. A binary that knows only 0010 never
-- reads this table and keeps counting on its own: compatible with 10.

-- section:      'inbox' (receipts per consumer and status, oldest due age per consumer) or
--               'outbox' (events per status, oldest unpublished age). One row each,
--               created here, so the election is a row lock and never an insert race.
-- figures:      what the last collection of the section found, as JSON (the collector's
--               format, ops/src/backlog_collector.cpp); '{}' before the first.
-- collected_at: when that collection started; '-infinity' before the first. A process
--               recomputes only when it is at least one collection interval old and it
--               wins FOR NO KEY UPDATE SKIP LOCKED on the row.
-- collected_by: the identity of the process that computed it (host/pid/collector).
CREATE TABLE backlog_snapshot (
    section      text        PRIMARY KEY,
    figures      jsonb       NOT NULL DEFAULT '{}',
    collected_at timestamptz NOT NULL DEFAULT '-infinity',
    collected_by text        NOT NULL DEFAULT '',
    CONSTRAINT backlog_snapshot_section CHECK (section IN ('inbox', 'outbox'))
);
INSERT INTO backlog_snapshot (section) VALUES ('inbox'), ('outbox');

-- Above its exact cap, the collector estimates a consumer's count per status from
-- ANALYZE's sample of (consumer, status) pairs: the joint frequency of this MCV list times
-- the table's current size estimate. Without it only the per-column frequencies exist,
-- whose product is wrong whenever finished rows dominate. Built by (auto)ANALYZE; taking
-- it costs ANALYZE one more pass over its sample, and creating it locks nothing writers use.
CREATE STATISTICS inbox_receipts_backlog_mix (mcv) ON consumer, status FROM inbox_receipts;
