// Every SQL statement of the client. The inbox and outbox statements are the C++
// library's own (inbox/src/inbox_queries.hpp, outbox/src/outbox_queries.hpp,
// core/src/core_queries.hpp, ops/src/operator_queries.hpp): the tables are the contract,
// and both languages write them the same way. `{schema}` is replaced by the quoted schema
// name once, when an Inbox or OutboxEmitter is constructed; values are always $n
// parameters. Built-ins are called as pg_catalog.<name>, so a function planted in `public`
// is never called (docs/schema.md, "search_path").
//
// Every statement runs unnamed (node-postgres without `name:`): nothing outlives its
// statement on the server connection, which PgBouncer's transaction pooling requires.

// Autocommit: the insert is its own transaction. ON CONFLICT waits for a concurrent
// inserter of the same identity and then does nothing. $11 and $12 are the ordering key
// and park_after, NULL for an unordered consumer.
export const kInsert = `
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id,
     event_type, schema_version, payload, metadata, fingerprint, ordering_key, park_after)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10, $11, $12::integer)
ON CONFLICT (consumer, source, scope_kind, scope_id, message_id) DO NOTHING
RETURNING id, status`;

// A wake-up riding on a statement that inserts: one NOTIFY on channel $13 per payload of
// $14, queued in the statement's transaction and sent when it commits. An uncorrelated
// sub-select in RETURNING runs once, as the first row is returned: with no row inserted
// (a duplicate), nothing is notified.
const kRideColumn = `,
       (SELECT pg_catalog.count(pg_catalog.pg_notify($13::text, n.payload))
        FROM pg_catalog.unnest($14::text[]) AS n(payload)) AS notified`;

export const kInsertRide = kInsert + kRideColumn;

// A separate statement, hence a fresh snapshot under READ COMMITTED: it sees the row that
// made the insert do nothing (a lookup inside the insert's statement may not).
export const kLookup = `
SELECT id, status, fingerprint
FROM {schema}.inbox_receipts
WHERE consumer = $1
  AND source = $2
  AND scope_kind = $3
  AND scope_id = $4
  AND message_id = $5`;

// acceptMany: one statement per slice of a batch; $1..$12 one array per column, payload and
// metadata as JSON arrays, positions sorted by identity so concurrent batches lock
// identities in one order (docs/schema.md, "accept_many").
export const kInsertMany = `
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id,
     event_type, schema_version, payload, metadata, fingerprint, ordering_key, park_after)
SELECT b.sk, b.si, b.src, b.c, b.m, b.et, b.sv, b.p, b.md, b.fp, b.ok, b.pa
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]),
                pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::text[]),
                pg_catalog.unnest($7::integer[]), pg_catalog.jsonb_array_elements($8::jsonb),
                pg_catalog.jsonb_array_elements($9::jsonb), pg_catalog.unnest($10::text[]),
                pg_catalog.unnest($11::text[]), pg_catalog.unnest($12::integer[]))
    WITH ORDINALITY AS b(sk, si, src, c, m, et, sv, p, md, fp, ok, pa, n)
ORDER BY b.n
ON CONFLICT (consumer, source, scope_kind, scope_id, message_id) DO NOTHING
RETURNING id, status, scope_kind, scope_id, source, consumer, message_id`;

export const kInsertManyRide = kInsertMany + kRideColumn;

// acceptMany: the stored rows of the identities the insert did nothing for, read after it
// with a fresh snapshot. n is the 1-based array position.
export const kLookupMany = `
SELECT b.n, r.id, r.status, r.fingerprint
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]),
                pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                pg_catalog.unnest($5::text[]))
    WITH ORDINALITY AS b(sk, si, src, c, m, n)
JOIN {schema}.inbox_receipts AS r
  ON r.consumer = b.c
 AND r.source = b.src
 AND r.scope_kind = b.sk
 AND r.scope_id = b.si
 AND r.message_id = b.m`;

// One NOTIFY per payload of $2 on channel $1, in one autocommit statement. Notifications
// are hints (listeners also poll): SET LOCAL semantics turn off the WAL flush wait for this
// transaction only, which a session SET behind PgBouncer would leak to the next client.
export const kNotifyMany = `
SELECT pg_catalog.pg_notify($1, n.payload)
FROM (SELECT pg_catalog.set_config('synchronous_commit', 'off', true)) AS s,
     pg_catalog.unnest($2::text[]) AS n(payload)`;

// The emitter's insert (C++ outbox_sql::kInsert). `ordered`: the trigger of
// 0013_outbox_key_order.sql gives an ordered event its key_seq and makes it WAITING behind
// an unfinished event of its key.
export const kOutboxInsert = `
INSERT INTO {schema}.outbox_events
    (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id,
     causation_id, correlation_id, traceparent, headers, payload, ordered)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13::boolean)
RETURNING id`;

// kOutboxInsert with the publishers' wake-up in the caller's transaction: PostgreSQL sends
// it when that transaction commits and drops it on a rollback, as the C++ emitter's
// on-commit NOTIFY does. Notifications of one transaction with the same channel and
// payload (the topic) are sent once.
export const kOutboxInsertNotify = `${kOutboxInsert},
          (SELECT pg_catalog.count(pg_catalog.pg_notify($14::text, $4::text))) AS notified`;

// `status`: the C++ operator statements (ops/src/operator_queries.hpp), run in one
// read-only REPEATABLE READ snapshot.
export const kInboxStatus = `
SELECT consumer,
       status,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NULL) AS live,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NOT NULL) AS discarded,
       coalesce((EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(available_at) FILTER (
           WHERE status IN ('PENDING', 'RETRYABLE')
             AND available_at <= pg_catalog.now())) * 1000::numeric)::bigint, 0) AS oldest_due_age_ms
FROM {schema}.inbox_receipts
GROUP BY consumer, status
ORDER BY consumer, status`;

export const kOutboxStatus = `
SELECT status,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NULL) AS live,
       pg_catalog.count(*) FILTER (WHERE discarded_at IS NOT NULL) AS discarded,
       coalesce((EXTRACT(epoch FROM pg_catalog.now() - pg_catalog.min(created_at) FILTER (
           WHERE status IN ('PENDING', 'WAITING', 'PUBLISHING', 'RETRYABLE'))) * 1000::numeric)::bigint, 0)
           AS oldest_unpublished_age_ms
FROM {schema}.outbox_events
GROUP BY status
ORDER BY status`;

export const kBlockedKeys = `
SELECT k.consumer,
       k.scope_kind,
       k.scope_id,
       k.ordering_key,
       k.head_id,
       r.status AS head_status,
       r.attempts AS head_attempts,
       coalesce(r.last_error_type, '') AS head_error_type,
       coalesce(r.last_error, '') AS head_error,
       (EXTRACT(epoch FROM pg_catalog.now() - k.blocked_since) * 1000::numeric)::bigint AS blocked_ms,
       (SELECT pg_catalog.count(*)
        FROM (SELECT 1
              FROM {schema}.inbox_receipts AS w
              WHERE w.consumer = k.consumer
                AND w.scope_kind = k.scope_kind
                AND w.scope_id = k.scope_id
                AND w.ordering_key = k.ordering_key
                AND w.status = 'WAITING'
              LIMIT $2::bigint + 1::bigint) AS behind) AS waiting
FROM {schema}.inbox_ordering_keys AS k
JOIN {schema}.inbox_receipts AS r ON r.id = k.head_id
WHERE k.blocked_since IS NOT NULL
ORDER BY k.blocked_since, k.consumer, k.scope_kind, k.scope_id, k.ordering_key
LIMIT $1::bigint`;

/** Schema names are the only identifiers spliced into SQL: a lower-case SQL identifier of
 * at most 48 bytes, as in C++ validate_schema_name. */
export function validateSchemaName(name: string): string {
  if (typeof name !== 'string' || !/^[a-z_][a-z0-9_]{0,47}$/.test(name)) {
    throw new TypeError(`schema: '${String(name)}' is not a lower-case SQL identifier of at most 48 bytes`);
  }
  return name;
}

/** `sql` with every `{schema}` replaced by the quoted schema name. */
export function withSchema(sql: string, schema: string): string {
  return sql.split('{schema}').join(`"${validateSchemaName(schema)}"`);
}

// The session holding back the xmin horizon the longest in this database (the C++
// kXminHolders of ops/src/console_queries.hpp with $1 = 1): the same snapshot as the counts.
export const kXminHolder = `
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
LIMIT 1`;
