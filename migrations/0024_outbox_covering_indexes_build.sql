-- boxcar:no-transaction
-- boxcar:statements-from-query
-- boxcar:compatible-with 16
-- Covering indexes for the outbox's backlog figures, step 2 of 3 (0023 made the parent
-- indexes ON ONLY the partitioned table). One CREATE INDEX CONCURRENTLY per partition that
-- has no index attached to a parent yet, each outside any transaction: emitters and
-- publishers go on writing while a partition of retained events is indexed. A run
-- interrupted half-way runs this query again: built indexes are attached by then or
-- skipped by IF NOT EXISTS, and the runner drops an INVALID leftover and builds it again.
SELECT pg_catalog.format('CREATE INDEX CONCURRENTLY IF NOT EXISTS %I ON %I.%I %s',
                         outbox_partition_index_name(c.oid, x.base), n.nspname, c.relname, x.definition)
FROM pg_catalog.pg_inherits AS i
JOIN pg_catalog.pg_class AS c
  ON c.oid = i.inhrelid
JOIN pg_catalog.pg_namespace AS n
  ON n.oid = c.relnamespace
CROSS JOIN outbox_covering_indexes() AS x
WHERE i.inhparent = 'outbox_events'::regclass
  AND NOT i.inhdetachpending
  AND NOT EXISTS (SELECT 1
                  FROM pg_catalog.pg_index AS pi
                  JOIN pg_catalog.pg_inherits AS ii
                    ON ii.inhrelid = pi.indexrelid
                  WHERE pi.indrelid = c.oid
                    AND ii.inhparent = (x.base || '_all')::regclass)
ORDER BY c.relname, x.base;
