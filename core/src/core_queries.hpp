// The core's own SQL: the migration runner, the notifier and the pool's session reset.
// Values are $n; `{schema}` is replaced by the quoted schema name (detail::with_schema)
// before preparing.
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
#pragma once

#include "boxcar/core/detail/sql_concat.hpp"

namespace boxcar::detail::core_sql {

// --- Migration lock ------------------------------------------------------------------
// One key per schema: different schemas migrate independently, one schema's runners
// queue up. The key is the one every earlier Boxcar used, so an old and a new runner
// exclude each other during a rolling deploy. $1 = schema.
#define BOXCAR_MIGRATE_LOCK_KEY "pg_catalog.hashtextextended('boxcar.migrate:' || $1::text, 0)"

// try, not wait: the runner polls with backoff so that the wait is bounded and reported.
inline constexpr const char* kMigrateTryLock = "SELECT pg_catalog.pg_try_advisory_lock(" BOXCAR_MIGRATE_LOCK_KEY ")";
inline constexpr const char* kMigrateUnlock = "SELECT pg_catalog.pg_advisory_unlock(" BOXCAR_MIGRATE_LOCK_KEY ")";

// Whether THIS session still holds the lock: after a reconnect (a new backend) it does
// not. A bigint advisory key shows in pg_locks as classid (high half), objid (low half),
// objsubid 1.
inline constexpr const char* kMigrateLockHeld = R"(
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_locks
    WHERE locktype = 'advisory'
      AND granted
      AND pid = pg_catalog.pg_backend_pid()
      AND objsubid = 1
      AND ((classid::bigint << 32) | objid::bigint) = )" BOXCAR_MIGRATE_LOCK_KEY R"(
) AS held)";

// Who holds the lock, to name in MIGRATION_LOCK_BUSY.
inline constexpr const char* kMigrateLockHolders = R"(
SELECT a.pid,
       coalesce(a.application_name, '') AS application_name,
       coalesce(pg_catalog.host(a.client_addr), 'local') AS client,
       coalesce(a.state, '') AS state,
       coalesce(pg_catalog.to_char(a.backend_start, 'YYYY-MM-DD"T"HH24:MI:SSOF'), '') AS since
FROM pg_catalog.pg_locks l
JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory'
  AND l.granted
  AND l.objsubid = 1
  AND ((l.classid::bigint << 32) | l.objid::bigint) = )" BOXCAR_MIGRATE_LOCK_KEY R"(
ORDER BY a.pid)";

#undef BOXCAR_MIGRATE_LOCK_KEY

// --- Migration session ---------------------------------------------------------------
// $1 = name shown in pg_stat_activity, so a waiting runner can name this one.
inline constexpr const char* kSetApplicationName = "SELECT pg_catalog.set_config('application_name', $1, false)";
// $1 = e.g. '2000ms'. Session-wide on the runner's own connection: every DDL statement
// gives up waiting for a table lock after it, instead of queueing all traffic behind it.
inline constexpr const char* kSetLockTimeout = "SELECT pg_catalog.set_config('lock_timeout', $1, false)";
// $1 = quoted schema; $2 = is_local (true inside a migration's transaction, false for a
// no-transaction step, reset afterwards with kResetSearchPath).
inline constexpr const char* kSetSearchPath = "SELECT pg_catalog.set_config('search_path', $1, $2)";
inline constexpr const char* kResetSearchPath = "RESET search_path";

// Sessions holding a lock on a relation of schema $1, oldest transaction first: named in
// MIGRATION_LOCK_TIMEOUT so the operator knows whom to wait for or stop.
inline constexpr const char* kRelationLockHolders = R"(
SELECT DISTINCT ON (a.pid)
       a.pid,
       c.relname,
       l.mode,
       coalesce(a.state, '') AS state,
       coalesce(a.application_name, '') AS application_name
FROM pg_catalog.pg_locks l
JOIN pg_catalog.pg_class c ON c.oid = l.relation
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE n.nspname = $1
  AND l.granted
  AND a.pid <> pg_catalog.pg_backend_pid()
ORDER BY a.pid
LIMIT 5)";

// --- schema_migrations ---------------------------------------------------------------
inline constexpr const char* kCreateSchema = "CREATE SCHEMA IF NOT EXISTS {schema}";
// Whether PUBLIC (grantee 0) may CREATE in schema $1: then any role could plant objects
// where Boxcar's functions look (docs/security.md, section 1). `public` of a database made
// before PostgreSQL 15 grants it; a schema Boxcar creates never does.
inline constexpr const char* kPublicMayCreate = R"(
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_namespace AS n,
         pg_catalog.aclexplode(COALESCE(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) AS a
    WHERE n.nspname = $1
      AND a.grantee = 0::oid
      AND a.privilege_type = 'CREATE'
) AS public_may_create)";
// compatible_with: the oldest binary (by its newest migration) that runs correctly with
// this row's migration applied. NULL in rows written before it existed: the version.
inline constexpr const char* kCreateMigrationsTable = R"(
CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT pg_catalog.now(),
    compatible_with integer
))";
// $1 = schema, $2 = table, $3 = column.
inline constexpr const char* kColumnExists = R"(
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_attribute a
    WHERE a.attrelid = pg_catalog.to_regclass(pg_catalog.format('%I.%I', $1::text, $2::text))::oid
      AND a.attname = $3
      AND NOT a.attisdropped
) AS present)";
// Only when missing (a schema migrated by a Boxcar before compatibility markers): ALTER
// takes ACCESS EXCLUSIVE on schema_migrations, which every readiness probe reads.
inline constexpr const char* kAddCompatibleWith =
    "ALTER TABLE {schema}.schema_migrations ADD COLUMN IF NOT EXISTS compatible_with integer";
// $1 = schema.
inline constexpr const char* kMigrationsTableExists =
    "SELECT pg_catalog.to_regclass(pg_catalog.format('%I.schema_migrations', $1::text)) IS NOT NULL AS present";
inline constexpr const char* kAppliedMigrations = R"(
SELECT version,
       checksum,
       compatible_with
FROM {schema}.schema_migrations
ORDER BY version)";
// The same, from a table that predates compatible_with.
inline constexpr const char* kAppliedMigrationsLegacy = R"(
SELECT version,
       checksum,
       NULL::integer AS compatible_with
FROM {schema}.schema_migrations
ORDER BY version)";
// $1 version, $2 file name, $3 checksum, $4 compatible_with.
inline constexpr const char* kRecordMigration = R"(
INSERT INTO {schema}.schema_migrations (version, name, checksum, compatible_with)
VALUES ($1, $2, $3, $4))";

// --- Concurrent index builds ---------------------------------------------------------
// Whether index $2 of schema $1 exists but is INVALID: what a failed or cancelled
// CREATE INDEX CONCURRENTLY leaves behind. IF NOT EXISTS would skip it silently.
inline constexpr const char* kIndexInvalid = R"(
SELECT EXISTS (
    SELECT 1
    FROM pg_catalog.pg_index i
    JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
    JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = $1
      AND c.relname = $2
      AND NOT i.indisvalid
) AS invalid)";
// {index} is the quoted index name, from a migration file (no user input).
inline constexpr const char* kDropIndexConcurrently = "DROP INDEX CONCURRENTLY IF EXISTS {schema}.{index}";

// --- Notifier --------------------------------------------------------------------------
// One NOTIFY per payload of $2 (a text[] literal) on channel $1, in one statement.
// pg_catalog.unnest: an unqualified unnest(text[]) would resolve to any public.unnest(text[])
// a role with CREATE on public planted (docs/schema.md, "search_path").
// Notifications are hints (listeners also poll): the commit waits for no WAL flush. SET
// LOCAL semantics (set_config(..., true)), not a session SET: behind PgBouncer in
// transaction pooling a session SET would stay on whichever server connection ran it and
// turn off synchronous commit for the next client's transactions there.
inline constexpr const char* kNotifyMany =
    "SELECT pg_catalog.pg_notify($1, n.payload)\n"
    "FROM (SELECT pg_catalog.set_config('synchronous_commit', 'off', true)) AS s,\n"
    "     pg_catalog.unnest($2::text[]) AS n(payload)";

// Run on a pooled connection whose loan may have run application code, before it is
// reused: what DISCARD ALL does, minus DEALLOCATE ALL and DISCARD PLANS (DISCARD ALL
// itself cannot run in a transaction block, nor in the implicit transaction of a
// multi-statement string). Prepared statements stay: libpqxx 6.4 remembers which ones it
// registered and would never re-prepare them after a DEALLOCATE it did not issue itself;
// the pool checks instead that the server holds exactly the ones libpqxx knows.
// SET SESSION AUTHORIZATION DEFAULT comes before RESET ALL: it is always allowed (it
// returns to the authenticated user) and gives RESET ALL its privileges back after a SET
// ROLE. Every statement here also runs inside a transaction block (kCommitAndResetSession).
inline constexpr char kResetStatements[] =
    "CLOSE ALL;\n"
    "SET SESSION AUTHORIZATION DEFAULT;\n"
    "RESET ROLE;\n"
    "RESET ALL;\n"
    "UNLISTEN *;\n"
    "SELECT pg_catalog.pg_advisory_unlock_all();\n"
    "DISCARD TEMP;\n"
    "DISCARD SEQUENCES;\n";

// The reset after the loan's last transaction, in autocommit (one round trip); the last
// statement lists the server's prepared statements for that check.
inline constexpr auto kResetSessionText =
    concat_sql(kResetStatements, "SELECT name FROM pg_catalog.pg_prepared_statements");
inline constexpr const char* kResetSession = kResetSessionText.data();

// The reset riding on the loan's last COMMIT (Tx::commit_and_reset_session), in its
// transaction block, so it costs no round trip of its own. SET CONSTRAINTS ALL IMMEDIATE
// first: deferred constraints and constraint triggers run there, with the transaction's
// role and settings, as they would have at COMMIT, and nothing is left for COMMIT to run
// after the reset. The prepared-statement list comes from the owner's last statement
// before it (PQexec returns only the last result of a string); a reset statement that
// fails aborts the block, so the string never commits without its reset.
inline constexpr auto kCommitAndResetSessionText =
    concat_sql("SET CONSTRAINTS ALL IMMEDIATE;\n", kResetStatements, "COMMIT");
inline constexpr const char* kCommitAndResetSession = kCommitAndResetSessionText.data();

}  // namespace boxcar::detail::core_sql
