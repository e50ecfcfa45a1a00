-- boxcar:no-transaction
-- boxcar:compatible-with 4
-- DEAD events by age, for `dead list` and the DEAD backlog gauge. Built CONCURRENTLY in
-- its own step like 0005.
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_events_dead
    ON outbox_events (updated_at)
    WHERE status = 'DEAD';
