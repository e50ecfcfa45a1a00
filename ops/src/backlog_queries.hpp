// The backlog collector's named queries. `{schema}` is replaced with the quoted schema
// once, at construction (boxcar::with_schema).
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
//
// Each query reads exactly one partial index of docs/schema.md, whose predicate it
// repeats literally so the planner can use it: the cost is proportional to the backlog
// it counts, never to the retained COMPLETED / PUBLISHED rows (which are not counted at
// all: they are unbounded, and `boxcar status` or a retention report can estimate them).
// tests/host/metrics_test.cpp checks the plans on 1,000,000 rows.
#pragma once

#include <string_view>

namespace boxcar::detail::backlog_sql {

// Due and scheduled backlog per consumer, from inbox_receipts_claimable
// (consumer, available_at) WHERE status IN ('PENDING', 'RETRYABLE').
// oldest_due_age: how long the oldest row whose available_at has passed has been due.
inline constexpr std::string_view kInboxClaimable = R"SQL(
SELECT consumer,
       pg_catalog.count(*) FILTER (WHERE status = 'PENDING') AS pending,
       pg_catalog.count(*) FILTER (WHERE status = 'RETRYABLE') AS retryable,
       coalesce(extract(epoch FROM pg_catalog.now() - pg_catalog.min(available_at) FILTER (WHERE available_at <= pg_catalog.now())), 0)::float8
         AS oldest_due_age
FROM {schema}.inbox_receipts
WHERE status IN ('PENDING', 'RETRYABLE')
GROUP BY consumer
)SQL";

// In-flight receipts per consumer, from inbox_receipts_leases
// (consumer, lease_expires_at) WHERE status = 'PROCESSING' (an index-only scan once the
// visibility map is set).
inline constexpr std::string_view kInboxProcessing = R"SQL(
SELECT consumer,
       pg_catalog.count(*) AS processing
FROM {schema}.inbox_receipts
WHERE status = 'PROCESSING'
GROUP BY consumer
)SQL";

// DEAD receipts an operator has not discarded, per consumer, from inbox_receipts_dead
// (consumer, updated_at) WHERE status = 'DEAD'. Discarded rows stay DEAD with
// discarded_at set (0003_operations.sql); they are settled, so not counted.
inline constexpr std::string_view kInboxDead = R"SQL(
SELECT consumer,
       pg_catalog.count(*) AS dead
FROM {schema}.inbox_receipts
WHERE status = 'DEAD'
  AND discarded_at IS NULL
GROUP BY consumer
)SQL";

// Outbox backlog waiting for a publisher, from outbox_events_due
// (available_at, id) WHERE status IN ('PENDING', 'RETRYABLE').
inline constexpr std::string_view kOutboxDue = R"SQL(
SELECT pg_catalog.count(*) FILTER (WHERE status = 'PENDING') AS pending,
       pg_catalog.count(*) FILTER (WHERE status = 'RETRYABLE') AS retryable,
       coalesce(extract(epoch FROM pg_catalog.now() - pg_catalog.min(created_at)), 0)::float8 AS oldest_age
FROM {schema}.outbox_events
WHERE status IN ('PENDING', 'RETRYABLE')
)SQL";

// Events claimed by a publisher, from outbox_events_leases (lease_expires_at)
// WHERE status = 'PUBLISHING'. They are unpublished too, so they count towards the
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

// Table health from the statistics collector and the relation sizes: catalog lookups,
// no table access. $1 is the schema name (unquoted). A table never touched since the
// statistics were reset has no pg_stat_user_tables row yet: 0 dead tuples.
inline constexpr std::string_view kTableHealth = R"SQL(
SELECT c.relname AS table_name,
       coalesce(s.n_dead_tup, 0)::float8 AS dead_tuples,
       pg_catalog.pg_total_relation_size(c.oid)::float8 AS size_bytes
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_namespace AS n
  ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_stat_user_tables AS s
  ON s.relid = c.oid
WHERE n.nspname = $1
  AND c.relname IN ('inbox_receipts', 'outbox_events')
  AND c.relkind IN ('r', 'p')
ORDER BY c.relname
)SQL";

// Which of the two tables this session may read: with least-privilege roles
// (docs/security.md, section 2) a host collects only what its role may SELECT (the
// worker and ingress the inbox, the publisher the outbox, the operator both). A
// column-level grant (the worker's SELECT (id) on the outbox) does not count. $1 is the
// schema name (unquoted).
inline constexpr std::string_view kReadableTables = R"SQL(
SELECT pg_catalog.has_table_privilege(pg_catalog.format('%I.inbox_receipts', s.name), 'SELECT') AS inbox,
       pg_catalog.has_table_privilege(pg_catalog.format('%I.outbox_events', s.name), 'SELECT') AS outbox
FROM (SELECT $1::text AS name) AS s
)SQL";

}  // namespace boxcar::detail::backlog_sql
