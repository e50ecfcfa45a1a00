// The SQL of retention (retention.cpp, janitor.cpp): `boxcar purge` and the janitor.
// `{schema}` is the quoted schema; values are $n. Built-ins are called as pg_catalog.<name>.
// DDL (DETACH, ATTACH, DROP of one partition) is built in retention.cpp from quoted
// identifiers: it takes no parameters.
#pragma once

namespace boxcar::detail::retention_sql {

// Inbox: one bounded batch per statement, oldest first through inbox_receipts_completed.
// SKIP LOCKED: a row someone holds is left for the next run rather than waited for.
// $1 retention in seconds, $2 batch size.
inline constexpr const char* kPurgeInbox = R"sql(
DELETE FROM {schema}.inbox_receipts
WHERE id IN (
    SELECT id
    FROM {schema}.inbox_receipts
    WHERE status = 'COMPLETED'
      AND completed_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1::double precision)
    ORDER BY completed_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
)sql";

// Dry run: how many receipts are past retention now ($1 seconds).
inline constexpr const char* kPurgeInboxCount = R"sql(
SELECT pg_catalog.count(*) AS past_retention
FROM {schema}.inbox_receipts
WHERE status = 'COMPLETED'
  AND completed_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1::double precision)
)sql";

// Inbox DEAD receipts (retention.dead_hours): the consumers that have any, one index
// descent of inbox_receipts_dead each; $1 the previous consumer ('' first: every consumer
// name is at least one byte).
inline constexpr const char* kDeadConsumerAfter = R"sql(
SELECT r.consumer
FROM {schema}.inbox_receipts AS r
WHERE r.status = 'DEAD'
  AND r.consumer > $1::text
ORDER BY r.consumer
LIMIT 1
)sql";

// One bounded batch of consumer $1's DEAD receipts whose last change (updated_at: when they
// went DEAD, were discarded or their key released) is older than $2 seconds, oldest first,
// resuming at $4 (the last batch's newest; '-infinity' first): a range scan of
// inbox_receipts_dead (consumer, updated_at) that never rereads the rows it kept. A DEAD
// head that still blocks its ordering key (policy block, neither released nor discarded;
// 0012's trigger) is kept: deleting it would let the key's next receipt run behind the
// operator's back. SKIP LOCKED: a row someone holds is left for the next run. $3 batch size.
// Returns how many went and the newest updated_at among them.
inline constexpr const char* kPurgeDead = R"sql(
WITH doomed AS (
    SELECT r.id
    FROM {schema}.inbox_receipts AS r
    WHERE r.consumer = $1::text
      AND r.status = 'DEAD'
      AND r.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $2::double precision)
      AND r.updated_at >= $4::timestamptz
      AND NOT (r.ordering_key IS NOT NULL
               AND r.park_after IS NULL
               AND r.key_released_at IS NULL
               AND r.discarded_at IS NULL)
    ORDER BY r.updated_at
    LIMIT $3
    FOR UPDATE SKIP LOCKED
), gone AS (
    DELETE FROM {schema}.inbox_receipts AS r
    USING doomed
    WHERE r.id = doomed.id
    RETURNING r.updated_at
)
SELECT pg_catalog.count(*) AS deleted,
       pg_catalog.max(gone.updated_at)::text AS newest
FROM gone
)sql";

// Dry run: how many DEAD receipts kPurgeDead would delete now ($1 seconds).
inline constexpr const char* kPurgeDeadCount = R"sql(
SELECT pg_catalog.count(*) AS past_retention
FROM {schema}.inbox_receipts AS r
WHERE r.status = 'DEAD'
  AND r.updated_at < pg_catalog.now() - pg_catalog.make_interval(secs => $1::double precision)
  AND NOT (r.ordering_key IS NOT NULL
           AND r.park_after IS NULL
           AND r.key_released_at IS NULL
           AND r.discarded_at IS NULL)
)sql";

// Outbox: daily partitions until $1 whole days after today are covered (0017's function;
// plain tables then ATTACH, SHARE UPDATE EXCLUSIVE on the parent). Needs the owner.
inline constexpr const char* kCreatePartitions = R"sql(
SELECT {schema}.outbox_create_partitions('{schema}.outbox_events'::regclass, $1::integer) AS created
)sql";

// Every partition, oldest first; past_retention: every id in it is older than $1 seconds.
inline constexpr const char* kPartitions = R"sql(
SELECT p.partition_name,
       p.bound,
       p.ends_at <= pg_catalog.now() - pg_catalog.make_interval(secs => $1::double precision) AS past_retention,
       p.detach_pending
FROM {schema}.outbox_partitions('{schema}.outbox_events'::regclass) AS p
)sql";

// How many events partition $1 (a qualified, quoted name; attached or detached) holds when
// each is finished since more than $2 seconds, else NULL (0017's function).
inline constexpr const char* kPartitionRetirable = R"sql(
SELECT {schema}.outbox_partition_retirable($1::regclass,
           pg_catalog.now() - pg_catalog.make_interval(secs => $2::double precision)) AS events
)sql";

// Tables of the schema that a retention run marked before detaching them (COMMENT ON
// TABLE, kRetiringMark in retention.cpp) and that are no partition now: a run that ended
// between its DETACH and the ATTACH or DROP after it left them. A detach-pending partition
// is still a partition (relispartition): step 2 finalizes those. $1 the mark's prefix;
// bound is the rest of the mark, as ATTACH PARTITION takes it.
inline constexpr const char* kOrphanedPartitions = R"sql(
SELECT c.relname AS partition_name,
       pg_catalog.substr(d.description, pg_catalog.length($1::text) + 1) AS bound
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_description AS d
  ON d.objoid = c.oid
 AND d.classoid = 'pg_catalog.pg_class'::regclass
 AND d.objsubid = 0
WHERE c.relnamespace = '{schema}'::regnamespace
  AND c.relkind = 'r'
  AND NOT c.relispartition
  AND pg_catalog.starts_with(d.description, $1::text)
ORDER BY c.relname
)sql";

// Who owns outbox_events, and whether this session may act as that role: the janitor
// creates and drops partitions as the owner, so they belong to it like the table does.
inline constexpr const char* kTableOwner = R"sql(
SELECT r.rolname AS owner,
       pg_catalog.pg_has_role(CURRENT_USER, r.oid, 'MEMBER') AS member,
       r.rolname = CURRENT_USER AS is_current
FROM pg_catalog.pg_class AS c
JOIN pg_catalog.pg_roles AS r
  ON r.oid = c.relowner
WHERE c.oid = '{schema}.outbox_events'::regclass::oid
)sql";

// The janitor's election: one session-level advisory lock per schema ($1 = schema name),
// held for the session's life; the session's end (a crash, a lost connection) frees it.
inline constexpr const char* kTryLeaderLock = R"sql(
SELECT pg_catalog.pg_try_advisory_lock(pg_catalog.hashtextextended('boxcar.janitor.' || $1::text, 0::bigint)) AS leader
)sql";

}  // namespace boxcar::detail::retention_sql
