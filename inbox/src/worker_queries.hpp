// Every SQL statement of the worker. `{schema}` is replaced by the quoted schema once;
// values are always $n parameters. Claims lock with FOR NO KEY UPDATE SKIP LOCKED:
// plain FOR UPDATE would also skip rows held by foreign-key KEY SHARE locks.
// The statements guarded by a claim token do not also say `status = 'PROCESSING'`: the
// token implies it (CHECK inbox_receipts_claim), and that predicate matches the partial
// index inbox_receipts_leases, which the planner then scans whole in place of the
// primary key whenever ANALYZE saw few claims in flight, the usual case: under load it
// held hundreds of live and dead entries and cost each completion milliseconds
// (docs/benchmarks.md, "Guarded statements name no status").
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
#pragma once

namespace boxcar::worker_sql {

// Claim due receipts of one consumer, oldest due first: an index scan on
// inbox_receipts_claimable. The unfair claim (WorkerOptions::fair_claims = false;
// kClaimFair, the default, otherwise). Autocommit, so the claim is durable before any handler runs. Suspects are left to the
// suspect lane (kClaimSuspect): they run only alone.
inline constexpr const char* kClaim = R"sql(
WITH due AS (
    SELECT id
    FROM {schema}.inbox_receipts
    WHERE consumer = $1
      AND status IN ('PENDING', 'RETRYABLE')
      AND available_at <= pg_catalog.now()
      AND NOT suspect
    ORDER BY available_at
    LIMIT $2
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET status = 'PROCESSING',
    claim_token = pg_catalog.gen_random_uuid(),
    lease_expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => $3::double precision / 1000::double precision),
    attempts = r.attempts + 1,
    updated_at = pg_catalog.now()
-- An array of ids, not a join with `due`, as in the fair claim (0026): a generic plan
-- guessed a share of the backlog for LIMIT $2 and hash-joined it, a sequential scan of the
-- table per claim (tests/pg/worker_plans_test.cpp).
WHERE r.id = ANY ((SELECT pg_catalog.array_agg(id) FROM due)::bigint[])
RETURNING r.id, r.claim_token::text AS claim_token, r.attempts, r.scope_kind, r.scope_id, r.source,
          r.consumer, r.message_id, r.event_type, r.schema_version, r.payload::text AS payload,
          r.metadata::text AS metadata, r.status, r.suspect, r.ordering_key IS NOT NULL AS ordered
)sql";

// The fair claim (docs/worker.md, "Claims"; WorkerOptions::fair_claims): due receipts of
// one consumer spread over its scopes (tenants, and the global scope), so one scope's
// backlog or poison messages cannot starve the others. Its cost grows with the claim
// limit, not with any scope's backlog; every step is an index scan on
// inbox_receipts_claimable_scope (consumer, scope_kind, scope_id, available_at), after
// the worker's round-robin cursor ($4, $5). The statement, with its steps explained,
// lives in migrations/0026_inbox_claim_fair_generic_plan.sql: a PL/pgSQL function that
// runs it with a generic plan, because as a prepared statement here it was
// planned again on most executions (44-87% measured), and planning it cost more than
// running it (docs/schema.md, "The fair claim's plan").
// Returns the last scope visited (cursor_kind, cursor_id) on every row: the worker's
// next cursor, a hint kept in memory (any value is correct; it only moves the start).
// Autocommit, and never suspects, as kClaim.
inline constexpr const char* kClaimFair = R"sql(
SELECT id, claim_token, attempts, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version,
       payload, metadata, status, suspect, ordered, cursor_kind, cursor_id
FROM {schema}.inbox_claim_fair($1::text, $2::bigint, $3::double precision, $4::text, $5::text)
)sql";

// The suspect lane: claim one due suspect of one consumer (an index scan on
// inbox_receipts_suspects). The worker calls it only when nothing else is queued or in
// flight in its process, and claims nothing else until that suspect's run is over.
inline constexpr const char* kClaimSuspect = R"sql(
WITH due AS (
    SELECT id
    FROM {schema}.inbox_receipts
    WHERE consumer = $1
      AND suspect
      AND status IN ('PENDING', 'RETRYABLE')
      AND available_at <= pg_catalog.now()
    ORDER BY available_at
    LIMIT 1
    FOR NO KEY UPDATE SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET status = 'PROCESSING',
    claim_token = pg_catalog.gen_random_uuid(),
    lease_expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => $2::double precision / 1000::double precision),
    attempts = r.attempts + 1,
    updated_at = pg_catalog.now()
FROM due
WHERE r.id = due.id
RETURNING r.id, r.claim_token::text AS claim_token, r.attempts, r.scope_kind, r.scope_id, r.source,
          r.consumer, r.message_id, r.event_type, r.schema_version, r.payload::text AS payload,
          r.metadata::text AS metadata, r.status, r.suspect, r.ordering_key IS NOT NULL AS ordered
)sql";

// Whether one consumer has a due suspect: the same index as kClaimSuspect, read at the
// lease-recovery cadence so the worker knows to empty its hands for the suspect lane.
inline constexpr const char* kSuspectDue = R"sql(
SELECT EXISTS (
    SELECT 1
    FROM {schema}.inbox_receipts
    WHERE consumer = $1
      AND suspect
      AND status IN ('PENDING', 'RETRYABLE')
      AND available_at <= pg_catalog.now()
)
)sql";

// A suspect's solo run starts now: committed on its own, just before the handler
// transaction begins, so that a lease expiring from here on is a crash strike, and one
// expiring before (claimed, never started) is not. Guarded by the claim token.
inline constexpr const char* kStartSolo = R"sql(
UPDATE {schema}.inbox_receipts
SET solo_started_at = pg_catalog.now()
WHERE id = $1
  AND claim_token = $2::uuid
  AND suspect
)sql";

// Lease recovery of one consumer: an index scan on inbox_receipts_leases. A row whose
// handler transaction still holds its lock is skipped. Nothing is re-claimed here: every
// expired claim goes back as a suspect, due now, for the suspect lane of any worker.
// - A claim whose solo run had started (solo_started_at) died or hung while it was the
//   only message in flight in its process: a crash strike. It keeps the attempt its
//   claim counted, and becomes DEAD when that was the last one (`exhausted`, decided once
//   in the CTE).
// - Any other expired claim may never have started, or died with a process it shared
//   with other messages: the attempt its claim counted is given back.
// Returns the rows that took a strike (status DEAD when exhausted), for their outcome.
inline constexpr const char* kReleaseExpired = R"sql(
WITH expired AS (
    SELECT id,
           solo_started_at IS NOT NULL AS strike,
           -- LEAST: an ordered consumer's park_after, as in kFail.
           solo_started_at IS NOT NULL AND attempts >= LEAST($3::integer, park_after) AS exhausted,
           -- GREATEST: a hand-made row must not fail the recovery of the whole consumer.
           CASE WHEN solo_started_at IS NOT NULL THEN attempts
                ELSE GREATEST(attempts - 1, finished_attempts) END AS charged
    FROM {schema}.inbox_receipts
    WHERE consumer = $1
      AND status = 'PROCESSING'
      AND lease_expires_at < pg_catalog.now()
    ORDER BY lease_expires_at
    LIMIT $2
    FOR NO KEY UPDATE SKIP LOCKED
),
released AS (
    UPDATE {schema}.inbox_receipts AS r
    SET status = CASE WHEN e.exhausted THEN 'DEAD'
                      WHEN e.charged = 0 THEN 'PENDING'
                      ELSE 'RETRYABLE' END,
        attempts = e.charged,
        crash_strikes = r.crash_strikes + CASE WHEN e.strike THEN 1 ELSE 0 END,
        suspect = true,
        claim_token = NULL,
        lease_expires_at = NULL,
        solo_started_at = NULL,
        available_at = CASE WHEN e.exhausted THEN r.available_at ELSE pg_catalog.now() END,
        dead_reason = CASE WHEN e.exhausted THEN 'LEASE_EXPIRED_EXHAUSTED' END,
        last_error_type = CASE WHEN e.strike THEN 'LeaseExpired' ELSE r.last_error_type END,
        -- ::text: text || integer has no exact operator in pg_catalog (only the polymorphic
        -- text || anynonarray), so a planted ||(text, integer) would be the better match.
        last_error = CASE WHEN e.strike
                          THEN 'crash strike ' || (r.crash_strikes + 1)::text ||
                               ': the worker process died or hung while running this message alone; ' ||
                               r.attempts::text || ' of ' || $3::integer::text || ' attempts used, ' ||
                               (r.attempts - r.finished_attempts)::text || ' ended in lease expiry'
                          ELSE r.last_error END,
        updated_at = pg_catalog.now()
    FROM expired AS e
    WHERE r.id = e.id
    RETURNING r.id, r.claim_token::text AS claim_token, r.attempts, r.scope_kind, r.scope_id, r.source,
              r.consumer, r.message_id, r.event_type, r.schema_version, r.payload::text AS payload,
              r.metadata::text AS metadata, r.status, r.suspect, r.ordering_key IS NOT NULL AS ordered, e.strike
)
SELECT * FROM released WHERE strike
)sql";

// An abandoned handler's session: its handler ignored the deadline and may keep the
// aborted transaction (and its row locks) alive by issuing statements. Terminating the
// session ends it. The session is the one the lock statement (kLock, kLockMany) ran in,
// named by what the server said there: its pid and its transaction's start. libpq's
// backendpid() is not that pid behind PgBouncer, which hands each client its own
// BackendKeyData. The start (pg_stat_activity.xact_start, which is that transaction's
// now()) matches only while the same transaction runs on that backend: a pid reused by a
// newer session, or a pooler's server connection that serves another client by now, has
// another one (or none), and is never hit. $1: backend pid, $2: the transaction's start
// in microseconds since the epoch, as kLock returned it.
inline constexpr const char* kTerminateBackend = R"sql(
SELECT pg_catalog.pg_terminate_backend(pid)
FROM pg_catalog.pg_stat_activity
WHERE pid = $1
  AND (extract(epoch FROM xact_start) * 1000000::numeric)::bigint = $2::bigint
)sql";

// First statement of a message transaction: the claim is still ours, and from now on a
// re-claimer's SKIP LOCKED passes over this row while the handler runs. It also returns
// the transaction's id (the row lock assigns one anyway): the completion checks that it
// still runs in this transaction, which a handler's raw COMMIT or ROLLBACK would end. And
// it names the server session that runs the attempt, for kTerminateBackend: the backend's
// pid and the transaction's start (now(), the same instant as pg_stat_activity's
// xact_start, in microseconds), asked of the server itself on this very connection.
// The transaction's deadline rides on it, one round trip fewer per message: $3 and $4 are
// statement_timeout and idle_in_transaction_session_timeout in ms (PostgreSQL 15 has no
// transaction_timeout), set transaction-local, so they bound the statements after this
// one. It runs in the transaction the handler shares (context.tx), so it qualifies
// set_config instead of pinning a search_path the handler would also see. This statement
// waits only for a row claimed under this worker's token (a lock held elsewhere means a
// stale claim, which the supervisor's deadline cancels like any statement of the
// attempt). The settings are uncorrelated sub-selects, returned so that they run: each
// runs once (an InitPlan), as the row is returned; with no row the claim is stale and the
// transaction rolls back. A MATERIALIZED CTE would run them once too, but builds a
// tuplestore per execution, which cost about 5% of the one-message throughput
// (docs/benchmarks.md, "The per-message transaction").
inline constexpr const char* kLock = R"sql(
SELECT r.id,
       pg_catalog.pg_current_xact_id()::text AS xact_id,
       pg_catalog.pg_backend_pid() AS backend_pid,
       (extract(epoch FROM pg_catalog.now()) * 1000000::numeric)::bigint AS xact_start_us,
       (SELECT pg_catalog.set_config('statement_timeout', $3::text, true)) AS statement_timeout,
       (SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', $4::text, true)) AS idle_timeout
FROM {schema}.inbox_receipts AS r
WHERE r.id = $1
  AND r.claim_token = $2::uuid
FOR NO KEY UPDATE OF r
)sql";

// Batched modes and batch handlers (docs/worker.md, "Batch handlers"): kLock for every
// receipt of the batch still claimed under its token, the deadline set the same way.
// $1: bigint[] of ids, $2: uuid[] of tokens, pairwise; $3, $4 as in kLock.
inline constexpr const char* kLockMany = R"sql(
SELECT r.id,
       pg_catalog.pg_current_xact_id()::text AS xact_id,
       pg_catalog.pg_backend_pid() AS backend_pid,
       (extract(epoch FROM pg_catalog.now()) * 1000000::numeric)::bigint AS xact_start_us,
       (SELECT pg_catalog.set_config('statement_timeout', $3::text, true)) AS statement_timeout,
       (SELECT pg_catalog.set_config('idle_in_transaction_session_timeout', $4::text, true)) AS idle_timeout
FROM {schema}.inbox_receipts AS r
JOIN ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::uuid[])) AS c(id, token)
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
    solo_started_at = NULL,
    finished_attempts = finished_attempts + 1,
    completed_at = pg_catalog.now(),
    updated_at = pg_catalog.now()
WHERE id = $1
  AND claim_token = $2::uuid
  AND (SELECT pg_catalog.pg_current_xact_id_if_assigned()) = $3::xid8
RETURNING extract(epoch FROM pg_catalog.now() - created_at)::float8 AS age_seconds
)sql";

// kComplete for a batch; $3 as in kComplete. $4 and $5 are the ids and claim tokens of the
// batch's ordered receipts (empty arrays when it has none): their keys move on to their
// next receipts first, in two statements for the whole batch, where the row trigger of 0012
// would run two per receipt (migrations/0021_inbox_key_settlement.sql). Every completed row
// joins the settlement's one row, so the settlement runs before any row is completed, and
// the completion's row triggers, which fire at the end of the statement, find each key
// already moved on. CASE: an unordered batch never calls the function.
inline constexpr const char* kCompleteMany = R"sql(
WITH settled AS MATERIALIZED (
  SELECT CASE WHEN pg_catalog.cardinality($4::bigint[]) > 0
              THEN {schema}.inbox_settle_keys($4::bigint[], $5::uuid[], $3::xid8) END AS promoted
)
UPDATE {schema}.inbox_receipts AS r
SET status = 'COMPLETED',
    claim_token = NULL,
    lease_expires_at = NULL,
    solo_started_at = NULL,
    finished_attempts = r.finished_attempts + 1,
    completed_at = pg_catalog.now(),
    updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::uuid[])) AS c(id, token)
CROSS JOIN settled
WHERE r.id = c.id
  AND r.claim_token = c.token
  AND (SELECT pg_catalog.pg_current_xact_id_if_assigned()) = $3::xid8
RETURNING r.id, extract(epoch FROM pg_catalog.now() - r.created_at)::float8 AS age_seconds
)sql";

// After a guard matched no row, or a handler failed: true when the statement no longer
// runs in the transaction kLock started ($1), i.e. a handler ended it with a raw COMMIT,
// ROLLBACK or END (autocommit: no id; COMMIT AND CHAIN: another id).
inline constexpr const char* kTransactionEnded = R"sql(
SELECT pg_catalog.pg_current_xact_id_if_assigned() IS DISTINCT FROM $1::xid8
)sql";

// A failed attempt: RETRYABLE after a backoff, or DEAD when it was the last attempt or
// the failure is permanent ($4 = true). Guarded by the claim token like completion. The
// handler ran and ended with an outcome, so a suspect is cleared: it did not crash.
// park_after (an ordered consumer's park_after(N) policy, docs/ordering.md) ends it
// sooner when it is the smaller: LEAST ignores its NULL (the block policy, or no key).
inline constexpr const char* kFail = R"sql(
UPDATE {schema}.inbox_receipts
SET status = CASE WHEN $4 OR attempts >= LEAST($5::integer, park_after) THEN 'DEAD' ELSE 'RETRYABLE' END,
    available_at = CASE WHEN $4 OR attempts >= LEAST($5::integer, park_after) THEN available_at
                        ELSE pg_catalog.now() + pg_catalog.make_interval(secs => $3::double precision / 1000::double precision) END,
    dead_reason = CASE WHEN $4 THEN $8
                       WHEN attempts >= $5::integer THEN 'ATTEMPTS_EXHAUSTED'
                       WHEN attempts >= park_after THEN 'PARKED_AFTER_ATTEMPTS' END,
    claim_token = NULL,
    lease_expires_at = NULL,
    suspect = false,
    solo_started_at = NULL,
    finished_attempts = finished_attempts + 1,
    last_error_type = $6,
    last_error = $7,
    updated_at = pg_catalog.now()
WHERE id = $1
  AND claim_token = $2::uuid
RETURNING status
)sql";

// Give back claimed receipts whose handler never started, without spending the attempt
// their claim counted, due after $3 ms: at shutdown (0), and after an infrastructure
// failure before the handler ran (a pool timeout, a lost connection). A suspect stays one.
inline constexpr const char* kHandBack = R"sql(
UPDATE {schema}.inbox_receipts AS r
SET status = CASE WHEN r.attempts - 1 = 0 THEN 'PENDING' ELSE 'RETRYABLE' END,
    attempts = r.attempts - 1,
    available_at = pg_catalog.now() + pg_catalog.make_interval(secs => $3::double precision / 1000::double precision),
    claim_token = NULL,
    lease_expires_at = NULL,
    solo_started_at = NULL,
    updated_at = pg_catalog.now()
FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::uuid[])) AS c(id, token)
WHERE r.id = c.id
  AND r.claim_token = c.token
)sql";

// After a handler's failure that a probe confirmed as a database outage (docs/worker.md,
// "Infrastructure failures are not attempts"): give the claim back without spending its
// attempt, as kHandBack, and count it in outage_hand_backs, unless the receipt has had
// $3 (worker.max_outage_hand_backs) of them already. Each one is due after a delay that
// doubles with the count, from $4 ms up to $5 ms (worker.backoff_base_ms and _cap_ms),
// with "equal jitter": uniform in [d/2, d], so N hand-backs span at least half the sum of
// their ceilings whatever the dice say. LEAST(.., 40): 2^40 already exceeds any cap.
// No row: the bound was reached (the caller charges the attempt) or the claim is stale.
// One receipt: each message of a batch is judged alone.
inline constexpr const char* kHandBackInOutage = R"sql(
UPDATE {schema}.inbox_receipts AS r
SET status = CASE WHEN r.attempts - 1 = 0 THEN 'PENDING' ELSE 'RETRYABLE' END,
    attempts = r.attempts - 1,
    outage_hand_backs = r.outage_hand_backs + 1,
    available_at = pg_catalog.now() + pg_catalog.make_interval(secs =>
        LEAST($5::double precision,
              $4::double precision * 2::double precision ^ LEAST(r.outage_hand_backs, 40)::double precision)
        * (0.5::double precision + 0.5::double precision * pg_catalog.random())
        / 1000::double precision),
    claim_token = NULL,
    lease_expires_at = NULL,
    solo_started_at = NULL,
    updated_at = pg_catalog.now()
WHERE r.id = $1
  AND r.claim_token = $2::uuid
  AND r.outage_hand_backs < $3::integer
RETURNING r.outage_hand_backs
)sql";

// The outage probe (inbox/src/outage_probe.cpp), on a fresh connection of its own: a
// trivial statement that also bounds the next one (statement_timeout in ms, $1, for the
// probe's session only). It proves that the server accepts connections and answers.
inline constexpr const char* kOutageProbeSession = R"sql(
SELECT pg_catalog.set_config('statement_timeout', $1::text, false)
)sql";

// The probe for a full disk or failing I/O, after kOutageProbeSession: a write that must
// allocate new space, in a subtransaction it rolls back (migration 0041; it runs as its
// owner, so the worker needs only EXECUTE on it).
inline constexpr const char* kOutageProbeWrite = R"sql(
SELECT {schema}.inbox_outage_probe()
)sql";

// Claimed receipts still waiting for their turn (a re-run batch's, a handler thread's
// run, the local queue's): extend their leases, guarded by their claim tokens, so a lease
// never has to cover more than one transaction (docs/worker.md, "How long a claim is
// held"). SKIP LOCKED: a handler thread may have taken one and locked it meanwhile, and
// the renewal must not wait out its transaction. $1: bigint[] of ids, $2: uuid[] of
// tokens, pairwise; $3: lease in ms.
inline constexpr const char* kRenewLeases = R"sql(
WITH waiting AS (
    SELECT w.id
    FROM {schema}.inbox_receipts AS w
    JOIN ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::uuid[])) AS c(id, token)
      ON w.id = c.id AND w.claim_token = c.token
    FOR NO KEY UPDATE OF w SKIP LOCKED
)
UPDATE {schema}.inbox_receipts AS r
SET lease_expires_at = pg_catalog.now() + pg_catalog.make_interval(secs => $3::double precision / 1000::double precision)
FROM waiting
WHERE r.id = waiting.id
)sql";

// worker.tenant_setting (docs/security.md, section 4): before each handler, the message's
// tenant ($2; '' for a global scope) into the custom setting $1, transaction-local (the
// `true`: SET LOCAL), so row-level-security policies of application tables can read it
// with current_setting($1). Parameterised: the tenant id comes from the sender's scope.
inline constexpr const char* kSetTenant = R"sql(
SELECT pg_catalog.set_config($1, $2, true)
)sql";

}  // namespace boxcar::worker_sql
