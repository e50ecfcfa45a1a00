// Every SQL statement of the operator console's reads (console_reads.cpp) and of the
// database health report (database_health.cpp). `{schema}` is replaced by the quoted
// schema name with with_schema(); values are always $n parameters; built-ins are called as
// pg_catalog.<name>; timestamps cross into C++ as microseconds since the epoch (`*_us`).
//
// Each statement reads a bounded number of rows whatever the backlog (docs/console.md,
// "Cost and plans"): the counts come from the fleet's stored backlog figures
// (backlog_snapshot, one row per section), the rates and the tenants read at most a cap of
// index entries, the DEAD lists are keyset pages of an index, and the health statements
// read the catalog. They read through the payload-free views and the columns the console
// role is granted (core/src/roles_queries.hpp), so the same statements run as that role.
#pragma once

namespace boxcar::detail::console_sql {

// The fleet's last backlog figures of one section ($1: 'inbox' or 'outbox'), as the
// elected backlog collector stored them (ops/src/backlog_collector.cpp), and their age.
inline constexpr const char* kBacklogFigures = R"sql(
SELECT s.figures::text AS figures,
       s.collected_at > '-infinity'::timestamptz AS computed,
       -- '-infinity' until the first collection, which now() cannot be subtracted from.
       CASE WHEN s.collected_at > '-infinity'::timestamptz
            THEN EXTRACT(epoch FROM pg_catalog.now() - s.collected_at)::float8 ELSE 0 END AS age_seconds,
       s.collected_by
FROM {schema}.backlog_snapshot AS s
WHERE s.section = $1::text
)sql";

// Completions per consumer in the last $1 seconds, reading at most $2 entries of
// inbox_receipts_completed (completed_at) WHERE status = 'COMPLETED', newest first: the
// cost is bounded by the cap, never by the retained COMPLETED rows. `seen` = $2 means the
// rate is at least what it shows.
inline constexpr const char* kCompletionRates = R"sql(
SELECT recent.consumer,
       pg_catalog.count(*) AS completed
FROM (SELECT r.consumer
      FROM {schema}.inbox_receipts AS r
      WHERE r.status = 'COMPLETED'
        AND r.completed_at > pg_catalog.now() - pg_catalog.make_interval(secs => $1::double precision)
      ORDER BY r.completed_at DESC
      LIMIT $2::bigint) AS recent
GROUP BY recent.consumer
)sql";

// Events published in the last $1 seconds, at most $2 entries of the published index of
// each partition (published_at) WHERE status = 'PUBLISHED'.
inline constexpr const char* kDeliveryRate = R"sql(
SELECT pg_catalog.count(*) AS published
FROM (SELECT 1
      FROM {schema}.outbox_events AS e
      WHERE e.status = 'PUBLISHED'
        AND e.published_at > pg_catalog.now() - pg_catalog.make_interval(secs => $1::double precision)
      LIMIT $2::bigint) AS recent
)sql";

// The most recent outbox failures ($1 at most): DEAD events not discarded, newest first,
// from the DEAD index of each partition (updated_at) WHERE status = 'DEAD'.
inline constexpr const char* kRecentOutboxErrors = R"sql(
SELECT d.id,
       d.topic,
       d.event_type,
       d.failure,
       d.failure_group,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS at_us
FROM {schema}.console_outbox_dead AS d
WHERE d.discarded_at IS NULL
ORDER BY d.updated_at DESC
LIMIT $1::bigint
)sql";

// The tenants behind the oldest due receipts of the consumers $1 (text[]): per consumer,
// its $2 oldest due receipts in inbox_receipts_claimable (consumer, available_at)
// order, counted by scope. Fair claims share each claim out over the scopes a consumer has
// due, so this is who waits longest and who a round robin serves.
inline constexpr const char* kTopTenants = R"sql(
SELECT c.consumer,
       oldest.scope_kind,
       oldest.scope_id,
       pg_catalog.count(*) AS due
FROM pg_catalog.unnest($1::text[]) AS c(consumer)
CROSS JOIN LATERAL (
    SELECT r.scope_kind, r.scope_id
    FROM {schema}.inbox_receipts AS r
    WHERE r.consumer = c.consumer
      AND r.status IN ('PENDING', 'RETRYABLE')
      AND r.available_at <= pg_catalog.now()
    ORDER BY r.available_at
    LIMIT $2::bigint) AS oldest
GROUP BY c.consumer, oldest.scope_kind, oldest.scope_id
ORDER BY pg_catalog.count(*) DESC, c.consumer, oldest.scope_kind, oldest.scope_id
LIMIT $3::bigint
)sql";

// DEAD failure groups as `boxcar dead list --group` computes them (operator_queries.hpp,
// kInboxDeadGroups), through the payload-free view. $1: groups at most.
inline constexpr const char* kInboxGroups = R"sql(
SELECT d.failure_group,
       d.failure,
       pg_catalog.count(*) AS records,
       (EXTRACT(epoch FROM pg_catalog.min(d.updated_at)) * 1000000::numeric)::bigint AS first_seen_us,
       (EXTRACT(epoch FROM pg_catalog.max(d.updated_at)) * 1000000::numeric)::bigint AS last_seen_us,
       pg_catalog.jsonb_agg(DISTINCT d.consumer)::text AS consumers,
       pg_catalog.jsonb_agg(DISTINCT d.event_type)::text AS event_types,
       '[]' AS topics
FROM {schema}.console_inbox_dead AS d
WHERE d.discarded_at IS NULL
GROUP BY d.failure, d.failure_group
ORDER BY pg_catalog.count(*) DESC, d.failure
LIMIT $1::bigint
)sql";

inline constexpr const char* kOutboxGroups = R"sql(
SELECT d.failure_group,
       d.failure,
       pg_catalog.count(*) AS records,
       (EXTRACT(epoch FROM pg_catalog.min(d.updated_at)) * 1000000::numeric)::bigint AS first_seen_us,
       (EXTRACT(epoch FROM pg_catalog.max(d.updated_at)) * 1000000::numeric)::bigint AS last_seen_us,
       '[]' AS consumers,
       pg_catalog.jsonb_agg(DISTINCT d.event_type)::text AS event_types,
       pg_catalog.jsonb_agg(DISTINCT d.topic)::text AS topics
FROM {schema}.console_outbox_dead AS d
WHERE d.discarded_at IS NULL
GROUP BY d.failure, d.failure_group
ORDER BY pg_catalog.count(*) DESC, d.failure
LIMIT $1::bigint
)sql";

// One page of a group's DEAD receipts, in the order of inbox_receipts_dead
// (consumer, updated_at): keyset pagination after ($2 consumer, $3 updated_at in µs, $4
// id); $2 NULL for the first page. $1: the group, $5: page size. A page reads its rows and
// the other groups' rows it passes over, never the receipts before the cursor.
inline constexpr const char* kInboxGroupPage = R"sql(
SELECT d.id,
       d.scope_kind,
       d.scope_id,
       d.source,
       d.consumer,
       d.message_id,
       d.event_type,
       d.attempts,
       d.dead_reason,
       d.last_error_type,
       d.last_error,
       d.replay_count,
       d.last_replayed_by,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us
FROM {schema}.console_inbox_dead AS d
WHERE d.discarded_at IS NULL
  AND d.failure_group = $1::text
  AND ($2::text IS NULL
       OR (d.consumer, d.updated_at, d.id)
          > ($2::text, TIMESTAMPTZ 'epoch' + INTERVAL '1 microsecond' * $3::double precision, $4::bigint))
ORDER BY d.consumer, d.updated_at, d.id
LIMIT $5::bigint
)sql";

// The same for DEAD outbox events, in the order of each partition's DEAD index
// (updated_at): after ($2 updated_at in µs, $3 id); $2 NULL for the first page. $1: the
// group, $4: page size.
inline constexpr const char* kOutboxGroupPage = R"sql(
SELECT d.id,
       d.tenant_scope AS scope_kind,
       d.tenant_id AS scope_id,
       d.event_id::text AS event_id,
       d.topic,
       d.message_key,
       d.event_type,
       d.attempts,
       d.dead_reason,
       d.last_error,
       d.replay_count,
       d.last_replayed_by,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us
FROM {schema}.console_outbox_dead AS d
WHERE d.discarded_at IS NULL
  AND d.failure_group = $1::text
  AND ($2::bigint IS NULL
       OR (d.updated_at, d.id) > (TIMESTAMPTZ 'epoch' + INTERVAL '1 microsecond' * $2::double precision, $3::bigint))
ORDER BY d.updated_at, d.id
LIMIT $4::bigint
)sql";

// One DEAD receipt by id ($1), discarded or not, without its content.
inline constexpr const char* kInboxReceipt = R"sql(
SELECT d.id,
       d.scope_kind,
       d.scope_id,
       d.source,
       d.consumer,
       d.message_id,
       d.event_type,
       d.schema_version,
       d.attempts,
       d.dead_reason,
       d.last_error_type,
       d.last_error,
       d.failure,
       d.failure_group,
       coalesce(d.ordering_key, '') AS ordering_key,
       d.replay_count,
       d.last_replayed_by,
       d.discarded_by,
       d.key_released_by,
       (EXTRACT(epoch FROM d.created_at) * 1000000::numeric)::bigint AS created_at_us,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us,
       (EXTRACT(epoch FROM d.discarded_at) * 1000000::numeric)::bigint AS discarded_at_us,
       (EXTRACT(epoch FROM d.key_released_at) * 1000000::numeric)::bigint AS key_released_at_us
FROM {schema}.console_inbox_dead AS d
WHERE d.id = $1::bigint
)sql";

// One DEAD outbox event by id ($1), discarded or not, without its content.
inline constexpr const char* kOutboxEvent = R"sql(
SELECT d.id,
       d.tenant_scope AS scope_kind,
       d.tenant_id AS scope_id,
       d.event_id::text AS event_id,
       d.topic,
       d.message_key,
       d.event_type,
       d.schema_version,
       d.attempts,
       d.dead_reason,
       d.last_error,
       d.failure,
       d.failure_group,
       d.replay_count,
       d.last_replayed_by,
       d.discarded_by,
       (EXTRACT(epoch FROM d.created_at) * 1000000::numeric)::bigint AS created_at_us,
       (EXTRACT(epoch FROM d.updated_at) * 1000000::numeric)::bigint AS updated_at_us,
       (EXTRACT(epoch FROM d.last_replayed_at) * 1000000::numeric)::bigint AS last_replayed_at_us,
       (EXTRACT(epoch FROM d.discarded_at) * 1000000::numeric)::bigint AS discarded_at_us
FROM {schema}.console_outbox_dead AS d
WHERE d.id = $1::bigint
)sql";

// Blocked ordering keys with their scope, head and since when (operator_queries.hpp,
// kBlockedKeys, without the waiting count), plus who released a released head's key.
// $1: keys at most.
inline constexpr const char* kBlockedKeys = R"sql(
SELECT k.consumer,
       k.scope_kind,
       k.scope_id,
       k.ordering_key,
       k.head_id,
       r.status AS head_status,
       r.attempts AS head_attempts,
       coalesce(r.last_error_type, '') AS head_error_type,
       coalesce(r.last_error, '') AS head_error,
       (EXTRACT(epoch FROM k.blocked_since) * 1000000::numeric)::bigint AS blocked_since_us,
       (EXTRACT(epoch FROM pg_catalog.now() - k.blocked_since) * 1000::numeric)::bigint AS blocked_ms
FROM {schema}.inbox_ordering_keys AS k
JOIN {schema}.inbox_receipts AS r ON r.id = k.head_id
WHERE k.blocked_since IS NOT NULL
ORDER BY k.blocked_since, k.consumer, k.scope_kind, k.scope_id, k.ordering_key
LIMIT $1::bigint
)sql";

// The most recent operator actions ($1 at most), newest first (primary key order).
inline constexpr const char* kRecentActions = R"sql(
SELECT a.id,
       (EXTRACT(epoch FROM a.acted_at) * 1000000::numeric)::bigint AS acted_at_us,
       a.actor,
       a.action,
       a.kind,
       a.target,
       a.row_count
FROM {schema}.operator_actions AS a
ORDER BY a.id DESC
LIMIT $1::bigint
)sql";

// Records one console action (run by the operator role, after the action's statement).
// $1 actor, $2 action, $3 kind, $4 target, $5 rows changed.
inline constexpr const char* kRecordAction = R"sql(
INSERT INTO {schema}.operator_actions (actor, action, kind, target, row_count)
VALUES ($1::text, $2::text, $3::text, $4::text, $5::integer)
)sql";

// ---------------------------------------------------------------------------------------
// database health (database_health.cpp): the catalog and the statistics views only.

// The sessions holding back the xmin horizon of this database's tables, oldest first ($1
// at most): the session whose snapshot (backend_xmin) or transaction id (backend_xid) is
// oldest keeps VACUUM from removing the rows deleted after it began. Sessions of other
// databases do not hold back this one's tables, but a walsender does: its backend_xmin is
// a standby's hot_standby_feedback (and its datname empty). Replication slots, which hold
// it too, are listed by kReplicationSlots. An autovacuum worker's snapshot is its own work, not a holder. Other roles' sessions show their details only
// to a role with pg_read_all_stats (docs/console.md, "Database health").
inline constexpr const char* kXminHolders = R"sql(
SELECT a.pid,
       coalesce(a.application_name, '') AS application_name,
       coalesce(a.usename::text, '') AS usename,
       coalesce(a.datname::text, '') AS datname,
       coalesce(a.state, '') AS state,
       coalesce(a.backend_type, '') AS backend_type,
       pg_catalog.age(coalesce(a.backend_xid, a.backend_xmin))::bigint AS xmin_age,
       coalesce(EXTRACT(epoch FROM pg_catalog.now() - a.xact_start)::float8, 0) AS xact_age_seconds,
       (EXTRACT(epoch FROM a.query_start) * 1000000::numeric)::bigint AS query_start_us
FROM pg_catalog.pg_stat_activity AS a
WHERE coalesce(a.backend_xid, a.backend_xmin) IS NOT NULL
  AND (a.datname = pg_catalog.current_database() OR a.backend_type = 'walsender')
  AND a.backend_type <> 'autovacuum worker'
  AND a.pid <> pg_catalog.pg_backend_pid()
ORDER BY pg_catalog.age(coalesce(a.backend_xid, a.backend_xmin)) DESC, a.pid
LIMIT $1::bigint
)sql";

// Replication slots and the WAL each keeps on the primary (bytes between the current WAL
// position and the slot's restart_lsn), and the xmin a slot holds back.
inline constexpr const char* kReplicationSlots = R"sql(
SELECT s.slot_name::text AS slot_name,
       s.slot_type,
       s.active,
       coalesce(s.database::text, '') AS database,
       coalesce(pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.restart_lsn), 0)::bigint
           AS retained_wal_bytes,
       coalesce(pg_catalog.age(coalesce(s.xmin, s.catalog_xmin)), 0)::bigint AS xmin_age,
       coalesce(s.wal_status, '') AS wal_status
FROM pg_catalog.pg_replication_slots AS s
ORDER BY 5 DESC, 1
)sql";

// Dead tuples and the last (auto)vacuum and (auto)analyze of the tables in the schema
// ($1), the outbox's partitions included, most dead tuples first ($2 at most).
inline constexpr const char* kTableHealth = R"sql(
SELECT t.relname::text AS table_name,
       t.n_live_tup AS live_tuples,
       t.n_dead_tup AS dead_tuples,
       (EXTRACT(epoch FROM t.last_vacuum) * 1000000::numeric)::bigint AS last_vacuum_us,
       (EXTRACT(epoch FROM t.last_autovacuum) * 1000000::numeric)::bigint AS last_autovacuum_us,
       (EXTRACT(epoch FROM t.last_autoanalyze) * 1000000::numeric)::bigint AS last_autoanalyze_us,
       t.autovacuum_count
FROM pg_catalog.pg_stat_user_tables AS t
WHERE t.schemaname = $1::text
ORDER BY t.n_dead_tup DESC, t.relname
LIMIT $2::bigint
)sql";

inline constexpr const char* kNotifyQueue = R"sql(
SELECT pg_catalog.pg_notification_queue_usage() AS usage
)sql";

// Sessions waiting for a lock on a relation of the schema ($1), with who blocks them
// ($2 at most).
inline constexpr const char* kLockWaits = R"sql(
SELECT l.pid,
       coalesce(a.application_name, '') AS application_name,
       c.relname::text AS table_name,
       l.mode,
       coalesce(EXTRACT(epoch FROM pg_catalog.now() - a.state_change)::float8, 0) AS waiting_seconds,
       pg_catalog.array_to_json(pg_catalog.pg_blocking_pids(l.pid))::text AS blocked_by
FROM pg_catalog.pg_locks AS l
JOIN pg_catalog.pg_class AS c ON c.oid = l.relation
JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace
LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
WHERE NOT l.granted
  AND n.nspname = $1::text
ORDER BY 5 DESC, l.pid
LIMIT $2::bigint
)sql";

}  // namespace boxcar::detail::console_sql
