// The SQL of apply_roles() (roles.cpp), apart from core_queries.hpp because it is one
// job with its own placeholders. `{schema}` is the quoted schema; `{migrator}`,
// `{ingress}`, `{worker}`, `{publisher}`, `{operator}` and `{console}` are the quoted role names;
// values are $n. Built-ins are called as pg_catalog.<name>.
//
// The grants name every column a role may write: a role that can only UPDATE the state
// columns cannot rewrite a receipt's payload or an event's topic. When a migration adds a
// column that a runtime statement writes, add it here too (docs/schema.md, "Roles").
#pragma once

namespace boxcar::detail::roles_sql {

// One apply_roles at a time (per database): two runs creating the same role, or granting
// on the same table, would otherwise fail with a unique violation or "tuple concurrently
// updated". Held until the transaction ends.
inline constexpr const char* kLock =
    "SELECT pg_catalog.pg_advisory_xact_lock(pg_catalog.hashtextextended('boxcar.roles', 0))";

// $1 = role name.
inline constexpr const char* kRoleExists =
    "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1) AS present";

inline constexpr const char* kMayCreateRoles = R"(
SELECT rolsuper OR rolcreaterole AS allowed
FROM pg_catalog.pg_roles
WHERE rolname = CURRENT_USER)";

// {role} is the quoted role name.
inline constexpr const char* kCreateRole = "CREATE ROLE {role} NOLOGIN";

// Handing ownership to {migrator} needs membership in it: a user with CREATEROLE (but not
// superuser) that just created the role is not a member in PostgreSQL 15. $1 = role name.
inline constexpr const char* kIsMember = "SELECT pg_catalog.pg_has_role(CURRENT_USER, $1, 'MEMBER') AS member";
inline constexpr const char* kJoinMigrator = "GRANT {migrator} TO CURRENT_USER";

// Owner first: a member of {migrator} (a LOGIN user that migrates) then owns Boxcar's
// objects through it. A no-op for objects it already owns.
inline constexpr const char* kOwnership[] = {
    "ALTER SCHEMA {schema} OWNER TO {migrator}",
    "ALTER TABLE {schema}.schema_migrations OWNER TO {migrator}",
    "ALTER TABLE {schema}.inbox_receipts OWNER TO {migrator}",
    "ALTER TABLE {schema}.outbox_events OWNER TO {migrator}",
    "ALTER VIEW {schema}.inbox_dead_records OWNER TO {migrator}",
    "ALTER VIEW {schema}.outbox_dead_records OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.failure_fingerprint(text, text) OWNER TO {migrator}",
    "ALTER TABLE {schema}.backlog_snapshot OWNER TO {migrator}",
    "ALTER STATISTICS {schema}.inbox_receipts_backlog_mix OWNER TO {migrator}",
    "ALTER TABLE {schema}.inbox_ordering_keys OWNER TO {migrator}",
    // The key-order trigger runs as its owner (SECURITY DEFINER, 0012): the migrator.
    "ALTER FUNCTION {schema}.inbox_receipts_key_order() OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.inbox_settle_keys(bigint[], uuid[], xid8) OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.inbox_claim_fair(text, bigint, double precision, text, text) OWNER TO {migrator}",
    // The outage probe (0041) creates a table as its owner (SECURITY DEFINER).
    "ALTER TABLE {schema}.inbox_outage_probe OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.inbox_outage_probe() OWNER TO {migrator}",
    "ALTER TABLE {schema}.outbox_ordering_keys OWNER TO {migrator}",
    // The operator console (0042): the action record and the payload-free DEAD views.
    "ALTER TABLE {schema}.operator_actions OWNER TO {migrator}",
    "ALTER VIEW {schema}.console_inbox_dead OWNER TO {migrator}",
    "ALTER VIEW {schema}.console_outbox_dead OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_key_order_enter() OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_key_order_leave() OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_key_order_leave_all() OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_key_order_truncate() OWNER TO {migrator}",
    // Outbox partitions (0017-0019): the functions, and every partition (ALTER TABLE ...
    // OWNER on the partitioned table does not reach them), so the janitor, acting as
    // {migrator}, can detach and drop any of them.
    "ALTER FUNCTION {schema}.outbox_event_id_floor(timestamptz) OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_event_id_time(uuid) OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_create_partitions(regclass, integer) OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_partitions(regclass) OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_partition_retirable(regclass, timestamptz) OWNER TO {migrator}",
    // Covering indexes (0023-0025): what outbox_create_partitions builds on each partition.
    "ALTER FUNCTION {schema}.outbox_covering_indexes() OWNER TO {migrator}",
    "ALTER FUNCTION {schema}.outbox_partition_index_name(regclass, text) OWNER TO {migrator}",
    R"(DO $owners$
DECLARE
    part regclass;
BEGIN
    FOR part IN
        SELECT i.inhrelid::regclass
        FROM pg_catalog.pg_inherits AS i
        WHERE i.inhparent = '{schema}.outbox_events'::regclass::oid
    LOOP
        EXECUTE pg_catalog.format('ALTER TABLE %s OWNER TO {migrator}', part);
    END LOOP;
END
$owners$)",
};

// Exact grants: whatever the runtime roles held on Boxcar's objects goes first (revoking a
// table privilege revokes the column privileges too), so a run after a narrower release
// leaves nothing behind. The application's own grants on its tables are not touched.
inline constexpr const char* kRevoke[] = {
    "REVOKE ALL ON SCHEMA {schema} FROM {ingress}, {worker}, {publisher}, {operator}, {console}",
    R"(REVOKE ALL ON TABLE {schema}.schema_migrations, {schema}.inbox_receipts, {schema}.outbox_events,
                     {schema}.inbox_dead_records, {schema}.outbox_dead_records, {schema}.backlog_snapshot,
                     {schema}.inbox_ordering_keys, {schema}.operator_actions, {schema}.console_inbox_dead,
                     {schema}.console_outbox_dead
FROM {ingress}, {worker}, {publisher}, {operator}, {console})",
    "REVOKE ALL ON FUNCTION {schema}.failure_fingerprint(text, text) FROM {ingress}, {worker}, {publisher}, {operator}, {console}",
    "REVOKE ALL ON FUNCTION {schema}.inbox_settle_keys(bigint[], uuid[], xid8) FROM {ingress}, {worker}, {publisher}, {operator}, {console}",
    "REVOKE ALL ON FUNCTION {schema}.inbox_claim_fair(text, bigint, double precision, text, text) FROM {ingress}, {worker}, {publisher}, {operator}, {console}",
    "REVOKE ALL ON TABLE {schema}.inbox_outage_probe FROM {ingress}, {worker}, {publisher}, {operator}, {console}",
    "REVOKE ALL ON FUNCTION {schema}.inbox_outage_probe() FROM {ingress}, {worker}, {publisher}, {operator}, {console}",
    "REVOKE ALL ON TABLE {schema}.outbox_ordering_keys FROM {ingress}, {worker}, {publisher}, {operator}, {console}",
};

inline constexpr const char* kGrant[] = {
    // USAGE only: no runtime role may CREATE in the schema.
    "GRANT USAGE ON SCHEMA {schema} TO {ingress}, {worker}, {publisher}, {operator}, {console}",
    // The readiness check (/readyz "migrations") of every process, and the console's health panel.
    "GRANT SELECT ON TABLE {schema}.schema_migrations TO {ingress}, {worker}, {publisher}, {operator}, {console}",

    // ingress: accept and accept_many. INSERT of the identity and content columns only (the
    // state columns take their defaults: a new receipt is PENDING). SELECT of the columns
    // the lookup of an existing identity, RETURNING and ON CONFLICT read (identity,
    // fingerprint, status), and of those the backlog collector counts by (docs/security.md,
    // section 2): never a payload, metadata or error text, which are other tenants' data.
    R"(GRANT SELECT (id, scope_kind, scope_id, source, consumer, message_id, fingerprint, status,
              available_at, lease_expires_at, updated_at, discarded_at, ordering_key),
      INSERT (scope_kind, scope_id, source, consumer, message_id,
              event_type, schema_version, payload, metadata, fingerprint, ordering_key, park_after)
ON TABLE {schema}.inbox_receipts
TO {ingress})",

    // worker: claim, suspect lane, lock, complete, fail, hand back, lease renewal and
    // recovery (inbox/src/worker_queries.hpp): UPDATE of the state columns only.
    R"(GRANT SELECT,
      UPDATE (status, claim_token, lease_expires_at, attempts, finished_attempts, available_at,
              suspect, solo_started_at, crash_strikes, dead_reason, last_error_type, last_error,
              completed_at, updated_at, outage_hand_backs)
ON TABLE {schema}.inbox_receipts
TO {worker})",
    // worker: OutboxEmitter::emit in the handler's transaction; SELECT (id) for its
    // RETURNING id. It cannot read, change or delete events.
    R"(GRANT INSERT (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id,
              causation_id, correlation_id, traceparent, headers, payload, ordered),
      SELECT (id)
ON TABLE {schema}.outbox_events
TO {worker})",

    // publisher: claim, lease recovery, mark published / failed / DEAD
    // (publisher/src/publisher_queries.hpp): UPDATE of the state columns only, so it
    // cannot re-route an event (topic, key, tenant) or change its payload.
    R"(GRANT SELECT,
      UPDATE (status, claim_token, lease_expires_at, attempts, available_at, dead_reason,
              last_error, published_at, updated_at)
ON TABLE {schema}.outbox_events
TO {publisher})",

    // operator: status, dead list / show / groups / retry / discard, purge
    // (ops/src/operator_queries.hpp). Retry and discard lock through the views (FOR NO KEY
    // UPDATE on a view needs UPDATE on it) and update the tables' state and audit columns.
    R"(GRANT SELECT, DELETE,
      UPDATE (status, attempts, finished_attempts, available_at, dead_reason, replay_count,
              last_replayed_at, last_replayed_by, discarded_at, discarded_by, key_released_at, key_released_by,
              updated_at, outage_hand_backs)
ON TABLE {schema}.inbox_receipts
TO {operator})",
    // operator: blocked keys (status, dead unblock); every Runtime's backlog collector:
    // the blocked-keys gauges. Read only: the key-order trigger writes it as its owner.
    "GRANT SELECT ON TABLE {schema}.inbox_ordering_keys TO {ingress}, {worker}, {publisher}, {operator}, {console}",
    R"(GRANT SELECT, DELETE,
      UPDATE (status, attempts, available_at, dead_reason, replay_count,
              last_replayed_at, last_replayed_by, discarded_at, discarded_by, updated_at)
ON TABLE {schema}.outbox_events
TO {operator})",
    "GRANT SELECT, UPDATE ON TABLE {schema}.inbox_dead_records, {schema}.outbox_dead_records TO {operator}",
    // publisher and operator: the backlog collector's WAITING estimate reads the outbox's
    // keys. Read only: the key-order triggers (SECURITY DEFINER since 0037) write it as its
    // owner, so no runtime role can freeze or release another tenant's key by hand.
    "GRANT SELECT ON TABLE {schema}.outbox_ordering_keys TO {publisher}, {operator}",
    // The views call it with the querying role's privileges.
    "GRANT EXECUTE ON FUNCTION {schema}.failure_fingerprint(text, text) TO {operator}, {console}",
    // operator: the console records each action as it takes it. The id is an identity
    // column, whose sequence needs no grant of its own.
    "GRANT SELECT, INSERT ON TABLE {schema}.operator_actions TO {operator}",

    // console: the operator console's reads (ops/src/console_queries.hpp, docs/console.md).
    // The DEAD records through the payload-free views only; of the tables, the columns its
    // overview counts and orders by, the ids and states, and the error texts (which the
    // DEAD views show anyway): never payload, metadata, headers or the content fingerprint.
    "GRANT SELECT ON TABLE {schema}.console_inbox_dead, {schema}.console_outbox_dead TO {console}",
    "GRANT SELECT ON TABLE {schema}.backlog_snapshot, {schema}.operator_actions TO {console}",
    R"(GRANT SELECT (id, scope_kind, scope_id, consumer, status, available_at, completed_at, updated_at,
              attempts, last_error_type, last_error, ordering_key, discarded_at)
ON TABLE {schema}.inbox_receipts
TO {console})",
    R"(GRANT SELECT (id, status, topic, event_type, created_at, published_at, updated_at, attempts,
              dead_reason, last_error, discarded_at)
ON TABLE {schema}.outbox_events
TO {console})",
    // worker: a batch's key settlement (0021), before its completion; it runs as its owner.
    "GRANT EXECUTE ON FUNCTION {schema}.inbox_settle_keys(bigint[], uuid[], xid8) TO {worker}",
    // worker: the fair claim (0026); it runs with the worker's own privileges on the inbox.
    "GRANT EXECUTE ON FUNCTION {schema}.inbox_claim_fair(text, bigint, double precision, text, text) TO {worker}",
    // worker: the write probe of a suspected outage (0041); it runs as its owner.
    "GRANT EXECUTE ON FUNCTION {schema}.inbox_outage_probe() TO {worker}",

    // ingress, worker, publisher: the backlog collector every Runtime runs
    // (ops/src/backlog_queries.hpp). SELECT to export the fleet's last figures; UPDATE of
    // the three result columns (FOR NO KEY UPDATE needs it too) to be the one that computes
    // them. A role cannot add or remove sections, nor compute a section whose table it
    // cannot read; it can overwrite figures, which only ever feed gauges.
    R"(GRANT SELECT,
      UPDATE (figures, collected_at, collected_by)
ON TABLE {schema}.backlog_snapshot
TO {ingress}, {worker}, {publisher})",
};

}  // namespace boxcar::detail::roles_sql
