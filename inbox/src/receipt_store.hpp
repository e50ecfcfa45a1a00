// The worker's database operations on inbox_receipts, one method per statement of
// worker_queries.hpp, each prepared once per connection.
#pragma once

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "boxcar/core/backoff.hpp"
#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/tx.hpp"
#include "claimed_receipt.hpp"
#include "server_session.hpp"

namespace boxcar::detail {

/// What a failed attempt records.
struct FailureRecord {
  bool permanent = false;
  /// DEAD reason when permanent: HANDLER_PERMANENT, UNSUPPORTED_EVENT,
  /// HANDLER_ENDED_TRANSACTION.
  std::string dead_reason;
  std::string error_type;
  std::string message;
  std::chrono::milliseconds retry_delay{0};
};

/// A position in the (scope_kind, scope_id) order of one consumer's scopes: the fair
/// claim starts its round robin after it. The empty cursor is before every scope.
struct ScopeCursor {
  std::string kind;
  std::string id;
};

/// What a fair claim took, and where the next one starts (the last scope it visited;
/// `after` unchanged when it claimed nothing).
struct FairClaim {
  std::vector<ClaimedReceipt> claims;
  ScopeCursor next;
};

class ReceiptStore {
 public:
  ReceiptStore(std::shared_ptr<ConnectionPool> pool, const std::string& schema);

  /// Claims up to `limit` due receipts of `consumer` in an autocommit statement; never
  /// suspects.
  std::vector<ClaimedReceipt> claim(const std::string& consumer, std::size_t limit, std::chrono::milliseconds lease);
  /// The fair claim (worker_queries.hpp, kClaimFair): up to `limit` due receipts of
  /// `consumer` shared out over its scopes in round robin, starting after `after`; never
  /// suspects. Autocommit.
  FairClaim claim_fair(const std::string& consumer, std::size_t limit, std::chrono::milliseconds lease,
                       const ScopeCursor& after);
  /// The suspect lane: claims one due suspect of `consumer`, if any. Call it only while
  /// nothing else is queued or in flight in this process (docs/worker.md).
  std::optional<ClaimedReceipt> claim_suspect(const std::string& consumer, std::chrono::milliseconds lease);
  /// Whether `consumer` has a due suspect.
  bool suspect_due(const std::string& consumer);
  /// Records, in its own autocommit statement, that the suspect's solo run starts now;
  /// false when the claim went stale.
  bool start_solo(const ClaimedReceipt& receipt);

  /// Lease recovery: expired claims of `consumer` go back as suspects, due now; a claim
  /// whose solo run had started takes a crash strike (DEAD when out of attempts), any
  /// other gets the attempt its claim counted back. Returns the rows that took a strike.
  std::vector<ClaimedReceipt> release_expired(const std::string& consumer, std::size_t limit, int max_attempts);
  /// Terminates `session` while it still runs the transaction the lock statement saw (so
  /// it is the abandoned attempt's, never a newer session that reused the pid nor a
  /// pooler's server connection that serves another client by now). Returns whether it
  /// was signalled.
  bool terminate_backend(const ServerSession& session);

  /// The deadline the lock statements set for the rest of their transaction, in ms,
  /// transaction-local: statement_timeout for each statement, and
  /// idle_in_transaction_session_timeout 500 ms longer for the gaps a handler leaves while
  /// it works outside the database (then the session ends and its locks go).
  struct TransactionDeadline {
    long long statement_timeout_ms;
    long long idle_timeout_ms;
    static TransactionDeadline until(std::chrono::steady_clock::time_point deadline) {
      const long long ms = std::max<long long>(
          1,
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
      return {.statement_timeout_ms = ms, .idle_timeout_ms = ms + 500};
    }
  };
  struct LockedReceipt {
    /// The database transaction id (xid8 as text), for complete().
    std::string xact_id;
    /// The session and transaction that hold the lock.
    ServerSession session;
  };
  /// Locks the receipt in `tx` if it is still claimed under its token and sets `deadline`,
  /// in one round trip; nullopt when stale.
  std::optional<LockedReceipt> lock(Tx& tx, const ClaimedReceipt& receipt, TransactionDeadline deadline);
  struct LockedBatch {
    std::vector<std::int64_t> ids;
    std::string xact_id;  // empty when nothing was locked
    ServerSession session;
  };
  /// Locks every receipt still claimed under its token and sets `deadline`, in one round
  /// trip; returns their ids and the database transaction id.
  LockedBatch lock_many(Tx& tx, std::span<const ClaimedReceipt* const> receipts, TransactionDeadline deadline);
  struct Completion {
    /// (receipt id, seconds since it was accepted) of each receipt completed.
    std::vector<std::pair<std::int64_t, double>> receipts;
  };
  /// Completes the receipt in `tx`, if `tx` is still the database transaction `xact_id`
  /// that locked it; returns no receipt when the claim went stale or the transaction was
  /// ended (tell them apart with transaction_ended()).
  Completion complete(Tx& tx, const ClaimedReceipt& receipt, const std::string& xact_id);
  /// Completes the receipts in `tx` under the same check; returns those that were still
  /// claimed. The keys of ordered receipts move on to their next receipts first, in one
  /// statement for the batch (docs/ordering.md).
  Completion complete_many(Tx& tx, std::span<const ClaimedReceipt* const> receipts, const std::string& xact_id);
  /// True when statements on `tx` no longer run in the database transaction `xact_id`:
  /// a handler ended it with a raw COMMIT, ROLLBACK or END.
  /// @throws pqxx errors, e.g. when the transaction is aborted (it is then still open).
  bool transaction_ended(Tx& tx, const std::string& xact_id);

  /// Records a failed attempt, in `tx` when given, else in its own autocommit statement.
  /// Returns the new status ("RETRYABLE" or "DEAD"), or nullopt when the claim was stale.
  std::optional<std::string> fail(Tx* tx, const ClaimedReceipt& receipt, const FailureRecord& failure,
                                  int max_attempts);
  /// Returns claims whose handler never started without spending their attempt, due
  /// after `delay`; returns how many. Receipts without a claim token (nothing to return)
  /// are skipped.
  std::size_t hand_back(std::span<const ClaimedReceipt* const> receipts,
                        std::chrono::milliseconds delay = std::chrono::milliseconds(0));
  std::size_t hand_back(std::span<const ClaimedReceipt> receipts);
  /// After a failure of its handler's transaction that a probe confirmed as a database
  /// outage: gives the claim back without spending its attempt and counts it in
  /// outage_hand_backs, due after a delay of `backoff`'s ceiling for that count with equal
  /// jitter (worker_queries.hpp, kHandBackInOutage), unless the receipt has had
  /// `max_hand_backs` of them. Returns its count so far, or nullopt when nothing was given
  /// back: the bound was reached, or the claim went stale. Autocommit.
  std::optional<int> hand_back_in_outage(const ClaimedReceipt& receipt, int max_hand_backs,
                                         const BackoffOptions& backoff);
  /// Extends the leases of receipts still claimed under their tokens to now + `lease`,
  /// in an autocommit statement, passing over rows another transaction has locked (a
  /// handler that took the receipt meanwhile): never waits. Returns how many.
  std::size_t renew_leases(std::span<const ClaimedReceipt* const> receipts, std::chrono::milliseconds lease);

 private:
  std::shared_ptr<ConnectionPool> pool_;
  std::string schema_;
  std::string claim_, claim_fair_, claim_suspect_, suspect_due_, start_solo_, release_, lock_, lock_many_, complete_,
      complete_many_, transaction_ended_, fail_, hand_back_, hand_back_in_outage_, renew_leases_;
};

}  // namespace boxcar::detail
