// The backlog collector's named queries. `{schema}` is replaced with the quoted schema
// once, at construction (boxcar::with_schema).
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
//
// Each query reads exactly one partial index of docs/schema.md, whose predicate it
// repeats literally so the planner can use it: never the retained COMPLETED / PUBLISHED
// rows (which are not counted at all: they are unbounded, and `boxcar status` or a
// retention report can estimate them). The inbox queries read at most a cap of rows per
// consumer (above it, kInboxEstimates); only the process elected through backlog_snapshot
// runs them, once per interval for the whole fleet (docs/operations.md).
// tests/host/backlog_collector_test.cpp checks the plans on 1,000,000 rows.
#pragma once

#include <string_view>

namespace boxcar::detail::backlog_sql {

// The inbox figures are read per consumer, each with a bounded number of rows: a
// `count(*)` over a whole partial index is linear in the backlog (~1.2 s at 1,000,000
// PENDING rows), which is exactly when the database is busiest. Each query first lists
// the consumers present in its index by a skip scan (one index descent per consumer,
// recursively: `min(consumer) > previous`), then, per consumer, counts at most $1 rows
// of the index, in index order (ORDER BY the index's second column: a bitmap scan would
// read every entry of the consumer before the LIMIT applies) (the collector passes its exact cap + 1: reading cap + 1 rows means
// "above the cap", and the collector replaces the count with kInboxEstimates's). Cost:
// one descent per consumer plus at most $1 index entries per consumer, whatever the
// backlog: the indexes hold every column these read (0027-0031 INCLUDE the status and
// discarded_at), so no heap page is read once vacuum has marked the pages all-visible,
// wherever among retained rows the backlog landed.

// Due and scheduled backlog per consumer, index-only scans of inbox_receipts_claimable
// (consumer, available_at) INCLUDE (status) WHERE status IN ('PENDING', 'RETRYABLE'). $1
// (bigint): rows read per consumer at most.
// seen: rows read (= $1 when the consumer's backlog is above the cap).
// oldest_due_age: exact, whatever the backlog: the index is ordered by available_at
// within a consumer, so the oldest due row is the first entry at or before now() — one
// index lookup per consumer.
inline constexpr std::string_view kInboxClaimable = R"SQL(
WITH RECURSIVE consumers AS (
  (SELECT r.consumer
   FROM {schema}.inbox_receipts AS r
   WHERE r.status IN ('PENDING', 'RETRYABLE')
   ORDER BY r.consumer
   LIMIT 1)
  UNION ALL
  SELECT (SELECT r.consumer
          FROM {schema}.inbox_receipts AS r
          WHERE r.status IN ('PENDING', 'RETRYABLE')
            AND r.consumer > c.consumer
          ORDER BY r.consumer
          LIMIT 1)
  FROM consumers AS c
  WHERE c.consumer IS NOT NULL
)
SELECT c.consumer,
       capped.pending,
       capped.retryable,
       capped.seen,
       coalesce(extract(epoch FROM pg_catalog.now() - due.available_at), 0)::float8 AS oldest_due_age
FROM consumers AS c
CROSS JOIN LATERAL (
  SELECT pg_catalog.count(*) FILTER (WHERE s.status = 'PENDING') AS pending,
         pg_catalog.count(*) FILTER (WHERE s.status = 'RETRYABLE') AS retryable,
         pg_catalog.count(*) AS seen
  FROM (SELECT r.status
        FROM {schema}.inbox_receipts AS r
        WHERE r.consumer = c.consumer
          AND r.status IN ('PENDING', 'RETRYABLE')
        ORDER BY r.available_at
        LIMIT $1::bigint) AS s
) AS capped
LEFT JOIN LATERAL (
  SELECT r.available_at
  FROM {schema}.inbox_receipts AS r
  WHERE r.consumer = c.consumer
    AND r.status IN ('PENDING', 'RETRYABLE')
    AND r.available_at <= pg_catalog.now()
  ORDER BY r.available_at
  LIMIT 1
) AS due ON true
WHERE c.consumer IS NOT NULL
)SQL";

// In-flight receipts per consumer, from inbox_receipts_leases
// (consumer, lease_expires_at) WHERE status = 'PROCESSING' (an index-only scan once the
// visibility map is set). $1 (bigint): rows read per consumer at most.
inline constexpr std::string_view kInboxProcessing = R"SQL(
WITH RECURSIVE consumers AS (
  (SELECT r.consumer
   FROM {schema}.inbox_receipts AS r
   WHERE r.status = 'PROCESSING'
   ORDER BY r.consumer
   LIMIT 1)
  UNION ALL
  SELECT (SELECT r.consumer
          FROM {schema}.inbox_receipts AS r
          WHERE r.status = 'PROCESSING'
            AND r.consumer > c.consumer
          ORDER BY r.consumer
          LIMIT 1)
  FROM consumers AS c
  WHERE c.consumer IS NOT NULL
)
SELECT c.consumer,
       capped.seen AS processing
FROM consumers AS c
CROSS JOIN LATERAL (
  SELECT pg_catalog.count(*) AS seen
  FROM (SELECT 1
        FROM {schema}.inbox_receipts AS r
        WHERE r.consumer = c.consumer
          AND r.status = 'PROCESSING'
        ORDER BY r.lease_expires_at
        LIMIT $1::bigint) AS s
) AS capped
WHERE c.consumer IS NOT NULL
)SQL";

// Receipts waiting behind their ordering key's head (docs/ordering.md), per consumer, from
// inbox_receipts_waiting (consumer, scope_kind, scope_id, ordering_key, key_seq, id) WHERE
// status = 'WAITING' (index-only, in index order). $1 (bigint): rows read per consumer at most. No consumer orders by key:
// an empty index, one descent.
inline constexpr std::string_view kInboxWaiting = R"SQL(
WITH RECURSIVE consumers AS (
  (SELECT r.consumer
   FROM {schema}.inbox_receipts AS r
   WHERE r.status = 'WAITING'
   ORDER BY r.consumer
   LIMIT 1)
  UNION ALL
  SELECT (SELECT r.consumer
          FROM {schema}.inbox_receipts AS r
          WHERE r.status = 'WAITING'
            AND r.consumer > c.consumer
          ORDER BY r.consumer
          LIMIT 1)
  FROM consumers AS c
  WHERE c.consumer IS NOT NULL
)
SELECT c.consumer,
       capped.seen AS waiting
FROM consumers AS c
CROSS JOIN LATERAL (
  SELECT pg_catalog.count(*) AS seen
  FROM (SELECT 1
        FROM {schema}.inbox_receipts AS r
        WHERE r.consumer = c.consumer
          AND r.status = 'WAITING'
        ORDER BY r.scope_kind, r.scope_id, r.ordering_key
        LIMIT $1::bigint) AS s
) AS capped
WHERE c.consumer IS NOT NULL
)SQL";

// Blocked ordering keys per consumer and scope (keys whose head failed), from
// inbox_ordering_keys_blocked (consumer, blocked_since) WHERE blocked_since IS NOT NULL:
// the key table holds only keys with work, and this index only the blocked ones. The
// collector sums the scopes per consumer and keeps the 20 with the most as labels.
inline constexpr std::string_view kInboxBlockedKeys = R"SQL(
SELECT k.consumer,
       k.scope_kind,
       k.scope_id,
       pg_catalog.count(*) AS blocked_keys,
       EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(k.blocked_since))::float8 AS oldest_blocked_age
FROM {schema}.inbox_ordering_keys AS k
WHERE k.blocked_since IS NOT NULL
GROUP BY k.consumer, k.scope_kind, k.scope_id
)SQL";

// DEAD receipts an operator has not discarded, per consumer, index-only scans of
// inbox_receipts_dead (consumer, updated_at) INCLUDE (discarded_at) WHERE status = 'DEAD'.
// Discarded rows stay DEAD with discarded_at set (0003_operations.sql); they are settled,
// so not counted (but read: the skip scan and the capped scan pass over their entries). A
// consumer with only discarded rows is left out. $1 (bigint): rows counted per consumer at
// most.
inline constexpr std::string_view kInboxDead = R"SQL(
WITH RECURSIVE consumers AS (
  (SELECT r.consumer
   FROM {schema}.inbox_receipts AS r
   WHERE r.status = 'DEAD'
   ORDER BY r.consumer
   LIMIT 1)
  UNION ALL
  SELECT (SELECT r.consumer
          FROM {schema}.inbox_receipts AS r
          WHERE r.status = 'DEAD'
            AND r.consumer > c.consumer
          ORDER BY r.consumer
          LIMIT 1)
  FROM consumers AS c
  WHERE c.consumer IS NOT NULL
)
SELECT c.consumer,
       capped.seen AS dead
FROM consumers AS c
CROSS JOIN LATERAL (
  SELECT pg_catalog.count(*) AS seen
  FROM (SELECT 1
        FROM {schema}.inbox_receipts AS r
        WHERE r.consumer = c.consumer
          AND r.status = 'DEAD'
          AND r.discarded_at IS NULL
        ORDER BY r.updated_at
        LIMIT $1::bigint) AS s
) AS capped
WHERE c.consumer IS NOT NULL
  AND capped.seen > 0
)SQL";

// The estimate of a consumer's receipts in one status, for the counts above the cap:
// ANALYZE's sample of (consumer, status) pairs (the extended statistics
// inbox_receipts_backlog_mix, 0011_backlog_snapshot.sql) gives each pair's share of the
// table; times the table's rows now, estimated as the planner does — rows per page at the
// last ANALYZE times the pages the table has now, so growth since then is counted. A pair
// missing from the sample (rarer than 1 in ~30,000 rows, or never analysed) has no row
// here. Catalog reads only. $1 is the schema name (unquoted).
inline constexpr std::string_view kInboxEstimates = R"SQL(
SELECT x.most_common_vals[i.n][pg_catalog.array_position(x.attnames, 'consumer'::name)] AS consumer,
       x.most_common_vals[i.n][pg_catalog.array_position(x.attnames, 'status'::name)] AS status,
       x.most_common_freqs[i.n] * t.row_estimate AS estimate
FROM pg_catalog.pg_stats_ext AS x
CROSS JOIN LATERAL pg_catalog.generate_subscripts(x.most_common_freqs, 1) AS i(n)
CROSS JOIN LATERAL (
  SELECT CASE
           WHEN c.relpages > 0 AND c.reltuples > 0::float4
             THEN c.reltuples::float8 / c.relpages::float8
                  * (pg_catalog.pg_relation_size(c.oid)::float8
                     / pg_catalog.current_setting('block_size')::float8)
           ELSE 0::float8
         END AS row_estimate
  FROM pg_catalog.pg_class AS c
  JOIN pg_catalog.pg_namespace AS n
    ON n.oid = c.relnamespace
  WHERE n.nspname = x.schemaname
    AND c.relname = x.tablename
) AS t
WHERE x.schemaname = $1::name
  AND x.tablename = 'inbox_receipts'::name
  AND x.statistics_name = 'inbox_receipts_backlog_mix'::name
)SQL";

// Outbox backlog waiting for a publisher, an index-only scan of outbox_events_due_covering
// (available_at, id) INCLUDE (status, created_at) WHERE status IN ('PENDING', 'RETRYABLE')
// (0023-0025).
inline constexpr std::string_view kOutboxDue = R"SQL(
SELECT pg_catalog.count(*) FILTER (WHERE status = 'PENDING') AS pending,
       pg_catalog.count(*) FILTER (WHERE status = 'RETRYABLE') AS retryable,
       coalesce(extract(epoch FROM pg_catalog.now() - pg_catalog.min(created_at)), 0)::float8 AS oldest_age
FROM {schema}.outbox_events
WHERE status IN ('PENDING', 'RETRYABLE')
)SQL";

// Events claimed by a publisher, an index-only scan of outbox_events_leases_covering
// (lease_expires_at) INCLUDE (created_at) WHERE status = 'PUBLISHING'. They are unpublished too, so they count towards the
// oldest unpublished age.
inline constexpr std::string_view kOutboxPublishing = R"SQL(
SELECT pg_catalog.count(*) AS publishing,
       coalesce(extract(epoch FROM pg_catalog.now() - pg_catalog.min(created_at)), 0)::float8 AS oldest_age
FROM {schema}.outbox_events
WHERE status = 'PUBLISHING'
)SQL";

// DEAD events not discarded, from outbox_events_dead (updated_at) WHERE status = 'DEAD'.
inline constexpr std::string_view kOutboxDead = R"SQL(
SELECT pg_catalog.count(*) AS dead
FROM {schema}.outbox_events
WHERE status = 'DEAD'
  AND discarded_at IS NULL
)SQL";

// Ordered events behind the head of their key (0013_outbox_key_order.sql), from
// outbox_events_waiting (topic, message_key, key_seq) WHERE status = 'WAITING': at most
// $1 (bigint) index entries are counted. At $1 or more (a hot key's backlog can be
// millions), the exact figure comes from outbox_ordering_keys instead: each key row counts
// its unfinished events, of which exactly one (the head) is not WAITING, so the sum of
// (unfinished - 1) is the number WAITING, read from one row per key with a backlog. The
// CASE evaluates that subquery only then.
inline constexpr std::string_view kOutboxWaiting = R"SQL(
SELECT CASE
         WHEN capped.seen < $1::bigint THEN capped.seen
         ELSE (SELECT coalesce(pg_catalog.sum(k.unfinished - 1::bigint), 0::numeric)::bigint
               FROM {schema}.outbox_ordering_keys AS k)
       END AS waiting
FROM (SELECT pg_catalog.count(*) AS seen
      FROM (SELECT 1
            FROM {schema}.outbox_events AS e
            WHERE e.status = 'WAITING'
            LIMIT $1::bigint) AS s) AS capped
)SQL";

// Table health from the statistics collector and the relation sizes: catalog lookups,
// no table access. $1 is the schema name (unquoted). A table never touched since the
// statistics were reset has no pg_stat_user_tables row yet: 0 dead tuples.
inline constexpr std::string_view kTableHealth = R"SQL(
SELECT c.relname AS table_name,
       coalesce(pg_catalog.sum(s.n_dead_tup), 0)::float8 AS dead_tuples,
       coalesce(pg_catalog.sum(pg_catalog.pg_total_relation_size(t.relid)), 0)::float8 AS size_bytes
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n
  ON n.oid = c.relnamespace
-- The table itself, or (outbox_events since 0019) every partition of it.
CROSS JOIN LATERAL (SELECT p.relid::oid
                    FROM pg_catalog.pg_partition_tree(c.oid) AS p
                    WHERE p.isleaf
                    UNION ALL
                    SELECT c.oid
                    WHERE c.relkind = 'r') AS t(relid)
LEFT JOIN pg_catalog.pg_stat_user_tables AS s
  ON s.relid = t.relid
WHERE n.nspname = $1
  AND c.relname IN ('inbox_receipts', 'outbox_events')
  AND c.relkind IN ('r', 'p')
GROUP BY c.relname
ORDER BY c.relname
)SQL";

// How full the cluster's notification queue is (0 to 1): its tail waits for the listener
// that has read the least, in any database, and once it is full every NOTIFY in the
// cluster fails (docs/operations.md). One function call, no table access.
inline constexpr std::string_view kNotifyQueueUsage = R"SQL(
SELECT pg_catalog.pg_notification_queue_usage() AS usage
)SQL";

// The xmin ages that hold back VACUUM on this database without a session of it showing
// them (0 when none): replication slots' xmin (a logical slot's catalog_xmin holds back the
// catalogs only) and prepared transactions. The sessions' come from the console's holders
// (read_xmin_holders), so the gauge and `boxcar status` agree on the oldest session.
// Catalog views only.
inline constexpr std::string_view kXminOutsideSessions = R"SQL(
SELECT coalesce(pg_catalog.max(h.age), 0)::float8 AS age
FROM (SELECT pg_catalog.age(s.xmin) AS age
      FROM pg_catalog.pg_replication_slots AS s
      WHERE s.xmin IS NOT NULL
      UNION ALL
      SELECT pg_catalog.age(p.transaction)
      FROM pg_catalog.pg_prepared_xacts AS p
      WHERE p.database = pg_catalog.current_database()) AS h
)SQL";

// Which of the two tables this session may read: with least-privilege roles
// (docs/security.md, section 2) a host computes only the figures its role may SELECT (the
// worker and ingress the inbox, the publisher the outbox, the operator both). The inbox
// counts read only the columns named here, which the ingress's column grants cover (it may
// not read payloads); the worker's SELECT (id) on the outbox does not count. And whether
// it may take part in the fleet's election (backlog_snapshot: SELECT to read the last
// figures, UPDATE to lock the row and store new ones). $1 is the schema name (unquoted).
inline constexpr std::string_view kReadableTables = R"SQL(
SELECT pg_catalog.has_column_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'consumer', 'SELECT')
         AND pg_catalog.has_column_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'status', 'SELECT')
         AND pg_catalog.has_column_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'available_at', 'SELECT')
         AND pg_catalog.has_column_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'lease_expires_at',
                                             'SELECT')
         AND pg_catalog.has_column_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'updated_at', 'SELECT')
         AND pg_catalog.has_column_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'discarded_at', 'SELECT')
         AND pg_catalog.has_column_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'ordering_key', 'SELECT')
         AND pg_catalog.has_table_privilege(pg_catalog.format('%I.inbox_ordering_keys', s.name), 'SELECT') AS inbox,
       pg_catalog.has_table_privilege(pg_catalog.format('%I.outbox_events', s.name), 'SELECT') AS outbox,
       pg_catalog.has_table_privilege(pg_catalog.format('%I.backlog_snapshot', s.name), 'SELECT') AS snapshot_read,
       pg_catalog.has_column_privilege(pg_catalog.format('%I.backlog_snapshot', s.name), 'figures', 'UPDATE')
         AS snapshot_write
FROM (SELECT $1::text AS name) AS s
)SQL";

// The election of one section's collector (backlog_snapshot, 0011): the row is returned,
// and stays locked until this transaction ends, only when its figures are at least $2
// seconds old (the collection interval) and no other process holds it — that process is
// computing them now. Everyone else reads the last figures (kSnapshotRead), which a row
// lock never blocks. A process that dies while elected rolls back and releases the row;
// the next one whose cycle finds it old computes. $1 = section, $2 = interval in seconds.
inline constexpr std::string_view kSnapshotClaim = R"SQL(
SELECT section
FROM {schema}.backlog_snapshot
WHERE section = $1::text
  AND collected_at <= pg_catalog.now() - pg_catalog.make_interval(secs => $2::float8)
FOR NO KEY UPDATE SKIP LOCKED
)SQL";

// Stores the figures the elected process computed, in its claiming transaction.
// $1 = section, $2 = figures (JSON), $3 = the process's identity.
inline constexpr std::string_view kSnapshotStore = R"SQL(
UPDATE {schema}.backlog_snapshot
SET figures = $2::jsonb,
    collected_at = pg_catalog.now(),
    collected_by = $3::text
WHERE section = $1::text
)SQL";

// The last figures of a section, their age and who computed them. computed is false
// before the first collection (figures '{}'). $1 = section.
inline constexpr std::string_view kSnapshotRead = R"SQL(
SELECT figures::text AS figures,
       collected_by,
       pg_catalog.isfinite(collected_at) AS computed,
       CASE
         WHEN pg_catalog.isfinite(collected_at)
           THEN extract(epoch FROM pg_catalog.now() - collected_at)::float8
         ELSE 0::float8
       END AS age
FROM {schema}.backlog_snapshot
WHERE section = $1::text
)SQL";

}  // namespace boxcar::detail::backlog_sql
