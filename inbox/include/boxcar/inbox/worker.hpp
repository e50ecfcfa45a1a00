// boxcar::Worker — turns accepted receipts into exactly one committed outcome each.
//
// A dispatcher thread claims due receipts of the owned consumers in batches
// (FOR NO KEY UPDATE SKIP LOCKED, a fresh claim token and a lease each, committed
// before any handler runs) and recovers expired leases; handler threads process them,
// each message (or each batch of `batch_size`) in one transaction that locks the
// receipt under its claim token, runs the handler on context.tx, and completes the
// receipt guarded by that token. Several workers, in any number of processes, may run
// against one database. Processing order is not guaranteed.
//
// A handler that ignores its cancellation signal cannot capture a thread: one still
// running 1 s past its deadline is abandoned (its thread detached and replaced, its
// database session terminated, the receipt left to lease recovery), counted in
// abandoned_handlers() and boxcar_worker_abandoned_handlers_total. See docs/worker.md.
//
// Thread-safety: start(), stop(), stats() and abandoned_handlers() may be called from any
// thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "boxcar/inbox/handler.hpp"
#include "boxcar/core/backoff.hpp"
#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/metrics.hpp"

namespace boxcar {

/// What a failed batch does when batch_size > 1 (docs/worker.md, "Batched mode", says why
/// Rerun is the default).
enum class BatchFailureMode {
  /// Each handler runs inside a savepoint; a failure rolls back to it and records that
  /// message's retry/DEAD in the same transaction. Costs a round trip per message.
  Savepoint,
  /// The batch runs without savepoints (fastest when nothing fails); when a handler fails
  /// the whole transaction rolls back and the batch is re-run one message per
  /// transaction, so handlers before the failing one run twice (one commit each at most).
  Rerun,
};

struct WorkerOptions {
  /// Schema holding inbox_receipts.
  std::string schema = "boxcar";
  /// The consumers this module declares (the same list the Inbox accepts).
  std::vector<std::string> consumers{};
  /// worker.enabled: false makes start() a no-op. An ingress-only process builds no
  /// Worker at all (the Runtime's ingress role), so true, the default, costs it nothing and
  /// a worker deployment needs no setting (docs/runtime.md, "Ingress-only and worker
  /// deployments").
  bool enabled = true;
  /// worker.consumers: the consumers this worker claims. Empty: every declared consumer,
  /// each of which then needs a handler. To run without one consumer's handler, list the
  /// others here (or disable the worker).
  std::vector<std::string> owned_consumers{};
  /// Handler threads.
  std::size_t concurrency = 4;
  /// Messages handled in one transaction (1: one transaction per message).
  std::size_t batch_size = 1;
  BatchFailureMode batch_failure_mode = BatchFailureMode::Rerun;
  /// Most receipts claimed by one claim statement.
  std::size_t claim_limit = 32;
  /// worker.fair_claims: true shares each claim out over the consumer's
  /// scopes (tenants, and the global scope) in round robin, an equal share each and the
  /// rest to the oldest due, so one tenant's backlog or poison messages cannot starve the
  /// others; false claims the oldest due receipts whoever they belong to. The fair claim
  /// costs about one index descent per scope it visits (at most claim_limit), never a
  /// scan of a backlog (docs/worker.md, "Claims"; docs/benchmarks.md, "The fair claim"). On by default: where
  /// one tenant has everything it costs little (bench_worker's fair_claims_t16).
  bool fair_claims = true;
  /// How long a claim is owned. Must exceed handler_timeout by at least 1 s, whatever the
  /// batch size: re-running a batch renews the waiting receipts' leases (docs/worker.md,
  /// "How long a claim is held").
  std::chrono::milliseconds lease{std::chrono::seconds(60)};
  /// Deadline of one handler transaction (one batch when batch_size > 1: a batch past it
  /// is re-run one message per transaction, each with this deadline). A handler still
  /// running 1 s after it has its thread abandoned and replaced.
  std::chrono::milliseconds handler_timeout{std::chrono::seconds(30)};
  /// Attempts before a failing receipt becomes DEAD.
  int max_attempts = 10;
  BackoffOptions backoff{};
  /// worker.max_outage_hand_backs: how many times in its life a receipt's attempt is given
  /// back uncharged after a handler's transaction failed with an outage SQLSTATE and a
  /// probe confirmed that the database itself is out (full disk, lost server); after that
  /// such failures are charged like any other. The k-th of them is due after
  /// min(backoff.cap, backoff.base * 2^(k-1)) with equal jitter (uniform in [d/2, d]), so
  /// at the defaults 32 of them span at least 61 minutes: a genuine outage of an hour
  /// charges nothing, while a message whose own statement brings the database down
  /// cannot loop forever (docs/worker.md, "Infrastructure failures are not attempts").
  /// 0: every such failure is charged.
  int max_outage_hand_backs = 32;
  /// Fallback polling when no NOTIFY arrives (and lease recovery cadence).
  std::chrono::milliseconds poll_interval{std::chrono::seconds(1)};
  /// How long stop() lets in-flight handlers finish before cancelling their queries;
  /// 2 s after that, threads still busy are abandoned, so stop() returns within
  /// shutdown_grace + 2 s (plus a claim statement or hand-back already in progress).
  std::chrono::milliseconds shutdown_grace{std::chrono::seconds(10)};
  /// Longest error text stored on a receipt; longer messages end in "…[truncated N bytes]"
  /// so the cut is visible.
  std::size_t max_error_bytes = 2000;
  /// worker.tenant_setting: a custom PostgreSQL setting (e.g. "app.tenant_id") the worker
  /// sets in context.tx before each handler runs, with SET LOCAL semantics
  /// (pg_catalog.set_config(name, value, true)): the tenant id of context.scope, or ""
  /// for a global scope. Row-level-security policies on application tables read it
  /// (docs/security.md, section 4). Empty (the default): nothing is set.
  std::string tenant_setting{};
  /// Where outcomes, handler durations and claims are recorded; null: nowhere.
  std::shared_ptr<Metrics> metrics{};
  /// Observer for benchmarks and tests: called on the claiming thread after each claim
  /// statement that returned (not one that threw), with the consumer, the receipts it
  /// claimed (0 for an empty claim) and the statement's duration in seconds, commit
  /// included. The claim's duration is the first figure to grow when dead index entries
  /// pile up behind a pinned xmin horizon (docs/design/held-snapshot.md). Keep it cheap:
  /// the claimed receipts wait for it.
  std::function<void(const std::string& consumer, std::size_t claimed, double seconds)> on_claim{};
};

/// True when `name` can be a custom PostgreSQL setting (WorkerOptions::tenant_setting):
/// two or more identifiers ([A-Za-z_][A-Za-z0-9_$]*) joined by dots, e.g. "app.tenant_id".
bool is_custom_setting_name(std::string_view name) noexcept;

/// Outcome counters since start; monotonically increasing.
struct WorkerStats {
  std::uint64_t claimed = 0;
  std::uint64_t completed = 0;
  std::uint64_t retried = 0;
  std::uint64_t dead = 0;
  std::uint64_t stale = 0;
  std::uint64_t unsupported = 0;
  std::uint64_t lease_expired = 0;
  std::uint64_t handed_back = 0;
  std::uint64_t handler_calls = 0;
  /// Handler threads given up on: their handler ignored its deadline (or the shutdown
  /// grace) and kept running; each was replaced (see Worker::abandoned_handlers()).
  std::uint64_t abandoned_handlers = 0;
  /// Leases that expired while their receipt ran alone in the suspect lane (each spent
  /// that attempt; docs/worker.md).
  std::uint64_t crash_strikes = 0;
  /// Claims given back without spending an attempt because the database failed before
  /// their handler ran (pool timeout, lost connection).
  std::uint64_t infrastructure_retries = 0;
  /// Claim statements run (one per owned consumer claimed for, empty ones included): the
  /// database cost of wake-ups and polls (docs/worker.md, "Wake-ups").
  std::uint64_t claim_statements = 0;
  /// Of claim_statements, those a handler thread ran for its own batch (batch_size > 1,
  /// while a consumer has a backlog and the local queue is empty: docs/worker.md, "Claims").
  std::uint64_t handler_thread_claims = 0;
};

class Worker {
 public:
  /// Validates the configuration.
  /// @throws ConfigError naming the key: "worker.consumers" for an owned consumer with no
  ///   handler (with no explicit list an enabled worker owns every declared consumer, so
  ///   each needs a handler) or not declared, and for an enabled worker that would own
  ///   no consumer; "handlers" for two handlers of one consumer, a handler
  ///   of an undeclared consumer, or a registration with neither `handler` nor
  ///   `batch_handler`, "worker.lease_ms" when the lease does not exceed the
  ///   handler timeout by at least a second, "pool.size" when the pool has fewer than
  ///   concurrency + 1 connections, "worker.tenant_setting" for a name that is not a
  ///   custom setting (two or more identifiers joined by dots), "worker.max_outage_hand_backs"
  ///   when negative, and for zero/negative sizes.
  Worker(std::shared_ptr<ConnectionPool> pool, WorkerOptions options, std::vector<HandlerRegistration> handlers);
  ~Worker();  // stop()
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  /// Starts the dispatcher and handler threads (no-op when disabled or running).
  void start();
  /// Graceful stop: stop claiming, hand back claimed-but-unstarted receipts at once
  /// (without spending their attempt), signal in-flight handlers, wait up to
  /// shutdown_grace, then cancel their queries and wait up to 2 s more for them to end;
  /// handler threads still busy then are abandoned (left running detached). Idempotent.
  void stop();
  /// Processes due receipts on the calling thread until none is due (tests, scripts).
  /// Returns how many receipts it claimed. Must not run while start()ed. Its handlers run
  /// on the calling thread, which is never abandoned: a handler that never returns blocks
  /// drain().
  std::size_t drain();

  /// The consumers this worker claims (empty when disabled).
  const std::vector<std::string>& owned_consumers() const noexcept;
  WorkerStats stats() const;
  /// Handler threads abandoned since construction. Non-zero means some handler ignored
  /// cancellation and may still be running on a detached thread: a process should exit
  /// with a failure status (the host's role commands do) so it gets restarted clean.
  std::uint64_t abandoned_handlers() const;

 private:
  class Impl;
  // Shared with the handler threads: an abandoned one keeps the Impl (and everything
  // its handler might touch) alive until it returns, even after ~Worker.
  std::shared_ptr<Impl> impl_;
};

}  // namespace boxcar
