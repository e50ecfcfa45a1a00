// Every SQL statement of the worker. `{schema}` is replaced by the quoted schema once;
// values are always $n parameters. Claims lock with FOR NO KEY UPDATE SKIP LOCKED:
// plain FOR UPDATE would also skip rows held by foreign-key KEY SHARE locks.
#pragma once

namespace boxcar::worker_sql {

// Claim due receipts of one consumer: an index scan on inbox_receipts_claimable.
// Autocommit, so the claim is durable before any handler runs.
inline constexpr const char* kClaim = R"sql(
WITH due AS (
    SELECT id
    FROM {schema}.inbox_receipts
    WHERE consumer = $1
      AND status IN ('PENDING', 'RETRYABLE')
      AND available_at <= now()
    ORDER BY available_at
    LIMIT $2
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET status = 'PROCESSING',
    claim_token = gen_random_uuid(),
    lease_expires_at = now() + make_interval(secs => $3::double precision / 1000),
    attempts = r.attempts + 1,
    updated_at = now()
FROM due
WHERE r.id = due.id
RETURNING r.id, r.claim_token::text AS claim_token, r.attempts, r.scope_kind, r.scope_id, r.source,
          r.consumer, r.message_id, r.event_type, r.schema_version, r.payload::text AS payload,
          r.metadata::text AS metadata, r.status
)sql";

// Recover expired leases of one consumer: an index scan on inbox_receipts_leases. A row
// whose handler transaction still holds its lock is skipped. A row that has used all its
// attempts becomes DEAD without another handler call; the others are re-claimed.
inline constexpr const char* kRecoverExpired = R"sql(
WITH expired AS (
    SELECT id
    FROM {schema}.inbox_receipts
    WHERE consumer = $1
      AND status = 'PROCESSING'
      AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT $2
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET status = CASE WHEN r.attempts >= $4 THEN 'DEAD' ELSE 'PROCESSING' END,
    claim_token = CASE WHEN r.attempts >= $4 THEN NULL ELSE gen_random_uuid() END,
    lease_expires_at = CASE WHEN r.attempts >= $4 THEN NULL
                            ELSE now() + make_interval(secs => $3::double precision / 1000) END,
    attempts = CASE WHEN r.attempts >= $4 THEN r.attempts ELSE r.attempts + 1 END,
    dead_reason = CASE WHEN r.attempts >= $4 THEN 'LEASE_EXPIRED_EXHAUSTED' END,
    last_error_type = CASE WHEN r.attempts >= $4 THEN 'LeaseExpired' ELSE r.last_error_type END,
    last_error = CASE WHEN r.attempts >= $4
                      THEN 'all ' || r.attempts || ' attempts started but ' ||
                           (r.attempts - r.finished_attempts) ||
                           ' ended in lease expiry (the worker died or hung each time)'
                      ELSE r.last_error END,
    updated_at = now()
FROM expired
WHERE r.id = expired.id
RETURNING r.id, r.claim_token::text AS claim_token, r.attempts, r.scope_kind, r.scope_id, r.source,
          r.consumer, r.message_id, r.event_type, r.schema_version, r.payload::text AS payload,
          r.metadata::text AS metadata, r.status
)sql";

// Lease recovery while the local queue has no room to re-claim into: expired leases of
// one consumer go back to RETRYABLE, due now for whichever worker has room (its next
// claim spends the next attempt), or become DEAD when out of attempts, exactly as
// kRecoverExpired would have. Returns the rows that became DEAD, for their outcome.
inline constexpr const char* kReleaseExpired = R"sql(
WITH expired AS (
    SELECT id
    FROM {schema}.inbox_receipts
    WHERE consumer = $1
      AND status = 'PROCESSING'
      AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT $2
    FOR NO KEY UPDATE SKIP LOCKED
),
released AS (
    UPDATE {schema}.inbox_receipts AS r
    SET status = CASE WHEN r.attempts >= $3 THEN 'DEAD' ELSE 'RETRYABLE' END,
        claim_token = NULL,
        lease_expires_at = NULL,
        available_at = CASE WHEN r.attempts >= $3 THEN r.available_at ELSE now() END,
        dead_reason = CASE WHEN r.attempts >= $3 THEN 'LEASE_EXPIRED_EXHAUSTED' END,
        last_error_type = CASE WHEN r.attempts >= $3 THEN 'LeaseExpired' ELSE r.last_error_type END,
        last_error = CASE WHEN r.attempts >= $3
                          THEN 'all ' || r.attempts || ' attempts started but ' ||
                               (r.attempts - r.finished_attempts) ||
                               ' ended in lease expiry (the worker died or hung each time)'
                          ELSE r.last_error END,
        updated_at = now()
    FROM expired
    WHERE r.id = expired.id
    RETURNING r.id, r.claim_token::text AS claim_token, r.attempts, r.scope_kind, r.scope_id, r.source,
              r.consumer, r.message_id, r.event_type, r.schema_version, r.payload::text AS payload,
              r.metadata::text AS metadata, r.status
)
SELECT * FROM released WHERE status = 'DEAD'
)sql";

// An abandoned handler's session: its handler ignored the deadline and may keep the
// aborted transaction (and its row locks) alive by issuing statements. Terminating the
// session ends it; the backend_start guard makes sure a reused pid is never hit.
// $1: backend pid, $2: milliseconds the attempt has been running (its session is older).
inline constexpr const char* kTerminateBackend = R"sql(
SELECT pg_catalog.pg_terminate_backend(pid)
FROM pg_catalog.pg_stat_activity
WHERE pid = $1
  AND backend_start < now() - make_interval(secs => $2::double precision / 1000)
)sql";

// First statement of a message transaction: the claim is still ours, and from now on a
// re-claimer's SKIP LOCKED passes over this row while the handler runs. It also returns
// the transaction's id (the row lock assigns one anyway): the completion checks that it
// still runs in this transaction, which a handler's raw COMMIT or ROLLBACK would end.
inline constexpr const char* kLock = R"sql(
SELECT id, pg_current_xact_id()::text AS xact_id
FROM {schema}.inbox_receipts
WHERE id = $1
  AND claim_token = $2::uuid
FOR NO KEY UPDATE
)sql";

// Batched mode: lock every receipt of the batch still claimed under its token, and
// return the transaction's id as kLock does.
// $1: bigint[] of ids, $2: uuid[] of tokens, pairwise.
inline constexpr const char* kLockMany = R"sql(
SELECT r.id, pg_current_xact_id()::text AS xact_id
FROM {schema}.inbox_receipts AS r
JOIN unnest($1::bigint[], $2::uuid[]) AS c(id, token)
  ON r.id = c.id AND r.claim_token = c.token
ORDER BY r.id
FOR NO KEY UPDATE OF r
)sql";

// The guarded completion. $3 is the transaction id kLock returned: after a raw COMMIT
// or ROLLBACK in the handler, libpqxx 6.4 carries on and every later statement runs in
// its own autocommit transaction, so without that check this UPDATE would commit
// COMPLETED on its own. There the id is unassigned (NULL) or another one and no row
// matches. The sub-select is evaluated once, before any row is updated.
inline constexpr const char* kComplete = R"sql(
UPDATE {schema}.inbox_receipts
SET status = 'COMPLETED',
    claim_token = NULL,
    lease_expires_at = NULL,
    finished_attempts = finished_attempts + 1,
    completed_at = now(),
    updated_at = now()
WHERE id = $1
  AND claim_token = $2::uuid
  AND status = 'PROCESSING'
  AND (SELECT pg_catalog.pg_current_xact_id_if_assigned()) = $3::xid8
RETURNING extract(epoch FROM now() - created_at)::float8
)sql";

// kComplete for a batch; $3 as in kComplete.
inline constexpr const char* kCompleteMany = R"sql(
UPDATE {schema}.inbox_receipts AS r
SET status = 'COMPLETED',
    claim_token = NULL,
    lease_expires_at = NULL,
    finished_attempts = r.finished_attempts + 1,
    completed_at = now(),
    updated_at = now()
FROM unnest($1::bigint[], $2::uuid[]) AS c(id, token)
WHERE r.id = c.id
  AND r.claim_token = c.token
  AND r.status = 'PROCESSING'
  AND (SELECT pg_catalog.pg_current_xact_id_if_assigned()) = $3::xid8
RETURNING r.id, extract(epoch FROM now() - r.created_at)::float8 AS age_seconds
)sql";

// After a guard matched no row, or a handler failed: true when the statement no longer
// runs in the transaction kLock started ($1), i.e. a handler ended it with a raw COMMIT,
// ROLLBACK or END (autocommit: no id; COMMIT AND CHAIN: another id).
inline constexpr const char* kTransactionEnded = R"sql(
SELECT pg_catalog.pg_current_xact_id_if_assigned() IS DISTINCT FROM $1::xid8
)sql";

// A failed attempt: RETRYABLE after a backoff, or DEAD when it was the last attempt or
// the failure is permanent ($4 = true). Guarded by the claim token like completion.
inline constexpr const char* kFail = R"sql(
UPDATE {schema}.inbox_receipts
SET status = CASE WHEN $4 OR attempts >= $5 THEN 'DEAD' ELSE 'RETRYABLE' END,
    available_at = CASE WHEN $4 OR attempts >= $5 THEN available_at
                        ELSE now() + make_interval(secs => $3::double precision / 1000) END,
    dead_reason = CASE WHEN $4 THEN $8
                       WHEN attempts >= $5 THEN 'ATTEMPTS_EXHAUSTED' END,
    claim_token = NULL,
    lease_expires_at = NULL,
    finished_attempts = finished_attempts + 1,
    last_error_type = $6,
    last_error = $7,
    updated_at = now()
WHERE id = $1
  AND claim_token = $2::uuid
  AND status = 'PROCESSING'
RETURNING status
)sql";

// Shutdown: give back a claimed receipt whose handler never started, without spending
// the attempt, due at once for any other worker.
inline constexpr const char* kHandBack = R"sql(
UPDATE {schema}.inbox_receipts AS r
SET status = CASE WHEN r.attempts - 1 = 0 THEN 'PENDING' ELSE 'RETRYABLE' END,
    attempts = r.attempts - 1,
    claim_token = NULL,
    lease_expires_at = NULL,
    updated_at = now()
FROM unnest($1::bigint[], $2::uuid[]) AS c(id, token)
WHERE r.id = c.id
  AND r.claim_token = c.token
  AND r.status = 'PROCESSING'
)sql";

// A batch rolled back and is re-run one message per transaction: extend the leases of
// the receipts still waiting for their turn, guarded by their claim tokens, so a lease
// never has to cover more than one transaction (docs/worker.md, "How long a claim is
// held"). $1: bigint[] of ids, $2: uuid[] of tokens, pairwise; $3: lease in ms.
// ROWS FROM with qualified functions: the two-array unnest(a, b) is shorthand that
// resolves each unnest through the search_path (docs/schema.md, "search_path").
inline constexpr const char* kRenewLeases = R"sql(
UPDATE {schema}.inbox_receipts AS r
SET lease_expires_at = now() + make_interval(secs => $3::double precision / 1000)
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::uuid[])) AS c(id, token)
WHERE r.id = c.id
  AND r.claim_token = c.token
  AND r.status = 'PROCESSING'
)sql";

}  // namespace boxcar::worker_sql
