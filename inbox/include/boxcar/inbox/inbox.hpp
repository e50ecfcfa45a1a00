// boxcar::Inbox — durable acceptance of incoming messages.
//
// accept() records a message under its identity (scope + source + consumer +
// message_id) and returns only after that record committed, so a transport may then
// acknowledge the delivery. The worker (a separate component) processes receipts later.
//
// Thread-safety: Inbox is thread-safe; share one per process. Each call borrows a
// connection from the pool for the duration of the call.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "boxcar/inbox/accept_request.hpp"
#include "boxcar/inbox/errors.hpp"
#include "boxcar/inbox/ordering.hpp"
#include "boxcar/inbox/receipt.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/metrics.hpp"

namespace boxcar {

namespace detail {
class AsyncNotifier;
class AcceptCoalescer;
struct PreparedRequest;
}  // namespace detail

/// The largest InboxOptions::max_statement_bytes: accept_many's payloads travel as one
/// jsonb array per statement, and PostgreSQL caps a value at 1 GB and a jsonb value at
/// 256 MiB of its binary form, up to about six times the JSON text (measured: docs/schema.md).
inline constexpr std::size_t kMaxStatementBytesCeiling = 32 * 1024 * 1024;
/// The default InboxOptions::max_statement_bytes.
inline constexpr std::size_t kDefaultMaxStatementBytes = 16 * 1024 * 1024;

struct InboxOptions {
  /// Schema holding inbox_receipts (see boxcar::migrate).
  std::string schema = "boxcar";
  /// Consumers this module declares; accept() rejects any other. Required.
  std::vector<std::string> consumers{};
  /// Consumers whose receipts run in order per key (docs/ordering.md): consumer name ->
  /// where its key comes from and its head-of-line policy. Each must be declared in
  /// `consumers`; a message without a usable key is refused (INBOX_ORDERING_KEY_MISSING,
  /// INBOX_ORDERING_KEY_INVALID). Every Inbox that accepts for a consumer needs the
  /// same rule: the key and the policy are recorded on each receipt when it is accepted.
  std::map<std::string, OrderingRule> ordering{};
  /// Payload limits: nesting depth and canonical size.
  CanonicalLimits payload_limits{};
  /// Byte budget of one statement: accept_many() sends a batch as statements of at most
  /// this many bytes of parameter text (in one transaction), and an item larger than it alone
  /// (payload, metadata and identity; only when payload_limits.max_bytes allows such) is
  /// refused by accept() and accept_many() with INBOX_ITEM_TOO_LARGE. At most
  /// kMaxStatementBytesCeiling.
  std::size_t max_statement_bytes = kDefaultMaxStatementBytes;
  /// Wake idle workers with NOTIFY after accepting (polling covers it when off).
  bool notify = true;
  /// Group commit: accept() calls that arrive while an accept() of this Inbox is
  /// committing wait for it to end, then share one transaction (accept_many semantics per
  /// call, at most kGroupCommitMaxCalls calls and max_statement_bytes of records), so one
  /// WAL flush serves many calls. The call that leads it first waits, at most
  /// kGroupCommitMaxGather and never longer than the previous flush took, until as many
  /// calls are queued as that flush carried: callers that send again as soon as they are
  /// answered come back a moment after their flush ends. A call that finds nothing in
  /// flight runs at once, alone, unless a flush of several calls ended within
  /// kGroupCommitBusyWindow: nothing lingers when idle. Each call still gets its own
  /// receipt or its own error; when a shared commit is uncertain, every call of that
  /// group is (README, "Accepting a message"). On by default: at 16 threads it records
  /// about twice as many calls per second as separate commits (docs/benchmarks.md, "Group
  /// commit"). false: every call commits on its own, concurrently.
  bool group_commit = true;
  /// Where accept results are counted (boxcar_inbox_accept_total); null: nowhere.
  std::shared_ptr<Metrics> metrics{};
};

/// Most accept() calls one group-commit transaction records (InboxOptions::group_commit).
inline constexpr std::size_t kGroupCommitMaxCalls = 100;
/// Most accept() flushes of one Inbox in flight at once with group commit: a call queues
/// only when this many are. One, whose leader gathers the calls coming back from the last
/// flush, made groups twice as large as two alternating flushes did, and moved as many
/// calls (docs/benchmarks.md, "Group commit").
inline constexpr std::size_t kGroupCommitFlushes = 1;
/// Longest a group-commit leader waits for calls to queue before its flush.
inline constexpr std::chrono::microseconds kGroupCommitMaxGather{500};
/// A flush of several calls that ended this recently makes the next call lead a gathering
/// flush instead of running alone.
inline constexpr std::chrono::microseconds kGroupCommitBusyWindow{2000};

/// Counters of accept()'s group commit since the Inbox was constructed.
struct GroupCommitStats {
  /// Calls recorded on their own (nothing in flight, or nobody else queued).
  std::uint64_t alone_calls = 0;
  /// Shared transactions run for two or more calls, and the calls they recorded.
  std::uint64_t groups = 0;
  std::uint64_t grouped_calls = 0;
  std::size_t largest_group = 0;
  /// Calls waiting for the flush in flight right now.
  std::size_t waiting = 0;
};

/// One item's outcome in accept_many(): a receipt, or that item's own
/// InboxValidationError / InboxConflictError.
class AcceptResult {
 public:
  explicit AcceptResult(Receipt receipt) : receipt_(receipt) {}
  explicit AcceptResult(std::exception_ptr error, std::string code)
      : error_(std::move(error)), code_(std::move(code)) {}

  bool ok() const noexcept { return receipt_.has_value(); }
  /// The receipt; rethrows the item's error when !ok().
  const Receipt& receipt() const;
  /// Empty when ok(), else the error's code (e.g. "IDENTITY_CONFLICT").
  const std::string& error_code() const noexcept { return code_; }
  /// The item's error, null when ok().
  std::exception_ptr error() const noexcept { return error_; }
  /// Throws the item's error as its own type; does nothing when ok().
  void rethrow_if_error() const;

 private:
  std::optional<Receipt> receipt_;
  std::exception_ptr error_;
  std::string code_{};
};

class Inbox {
 public:
  /// @throws ConfigError when no consumers are declared, a consumer name is invalid or
  ///   the schema name is invalid. Does not touch the database.
  Inbox(std::shared_ptr<ConnectionPool> pool, InboxOptions options);
  ~Inbox();
  Inbox(const Inbox&) = delete;
  Inbox& operator=(const Inbox&) = delete;

  /// Durably records `request` and returns after it committed: alone in a single
  /// autocommit statement when no accept() flush of this Inbox is in flight or just ended
  /// (or group commit is off), else in one transaction shared with the calls that queued
  /// meanwhile (InboxOptions::group_commit). Blocks while it waits; holds a pooled connection only while it
  /// leads a flush.
  /// - new identity: Receipt{Accepted, id, PENDING} (a receipt of an ordered consumer
  ///   that is not its key's head is stored WAITING, which only a later read shows);
  /// - same identity, same fingerprint: Receipt{Duplicate, id, current status}, the
  ///   stored row untouched;
  /// @throws InboxValidationError before touching the database (INBOX_ITEM_TOO_LARGE when
  ///   the item exceeds options().max_statement_bytes);
  /// @throws InboxConflictError for the same identity with a different fingerprint;
  /// @throws InboxStorageError when the database fails (uncertain() when the write may
  ///   have committed; in a shared transaction every call of the group gets it, and each
  ///   must redeliver: the inbox deduplicates).
  Receipt accept(const AcceptRequest& request);

  /// Checks `request` exactly as accept() and accept_many() do before they touch the
  /// database, and records nothing: for transports that want to refuse early, and for
  /// the fuzzer (tests/fuzz). Thread-safe; never blocks.
  /// @throws InboxValidationError as accept() does.
  void validate(const AcceptRequest& request) const;

  /// Accepts a batch in one transaction and returns one result per item, in input
  /// order. Identities repeated inside the batch collapse onto one receipt (the first
  /// is Accepted, repeats Duplicate; a repeat with other content is a conflict). An
  /// invalid or conflicting item does not affect the others, nor does an item too large
  /// ever to be stored (INBOX_ITEM_TOO_LARGE). A batch over options().max_statement_bytes
  /// is written by several statements in that one transaction: any size is accepted whole.
  /// @throws InboxStorageError when the transaction fails: then no item was recorded
  ///   (or, if uncertain(), all or none were).
  std::vector<AcceptResult> accept_many(std::span<const AcceptRequest> batch);

  const InboxOptions& options() const noexcept { return options_; }
  /// accept()'s group-commit counters (all zero when options().group_commit is off).
  GroupCommitStats group_commit_stats() const;
  /// The NOTIFY channel workers LISTEN on for this schema.
  static std::string notify_channel(const std::string& schema);

 private:
  std::shared_ptr<ConnectionPool> pool_;
  InboxOptions options_;
  struct Queries;
  std::unique_ptr<Queries> queries_;
  std::unique_ptr<detail::AsyncNotifier> notifier_;
  std::unique_ptr<detail::AcceptCoalescer> coalescer_;

  // The single-row path: one autocommit insert (and a lookup when it found the identity),
  // counted in the metrics.
  Receipt accept_alone(const detail::PreparedRequest& p);
  // accept_prepared()'s steps on a planned batch: its statements' rounds and each item's result.
  class BatchAccept;
  /// accept_many() after validation: `prepared` holds one entry per item (null for an
  /// invalid one, whose error `results` already holds).
  std::vector<AcceptResult> accept_prepared(const std::vector<const detail::PreparedRequest*>& prepared,
                                            std::vector<std::optional<AcceptResult>> results);
  Receipt accept_unmetered(const detail::PreparedRequest& p);
  void count(const std::string& consumer, std::string_view result) const;
};

}  // namespace boxcar
