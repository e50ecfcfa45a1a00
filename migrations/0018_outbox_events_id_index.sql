-- boxcar:no-transaction
-- boxcar:compatible-with 16
-- Outbox time partitions, step 2 of 3: today's table gets the plain index on id that the
-- partitioned table's outbox_events_id_all expects of every partition (its primary key's
-- unique index does not match a non-unique one), so that 0019's ATTACH finds it instead of
-- building it under an ACCESS EXCLUSIVE lock. Built CONCURRENTLY in its own step like 0005.
CREATE INDEX CONCURRENTLY IF NOT EXISTS outbox_events_id
    ON outbox_events (id);
