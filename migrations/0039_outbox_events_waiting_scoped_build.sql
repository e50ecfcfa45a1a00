-- boxcar:no-transaction
-- boxcar:statements-from-query
-- boxcar:compatible-with 37
-- Outbox keys are scoped, step 3 of 4: one CREATE INDEX CONCURRENTLY per partition that has
-- no index attached to a parent of outbox_covering_indexes() yet (since 0038: the scoped
-- waiting index), each outside any transaction, as 0024 did: emitters and publishers go on
-- writing while a partition of retained events is indexed. A run interrupted half-way runs
-- this query again.
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
