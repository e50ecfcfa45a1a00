// boxcar::Inbox — durable acceptance of incoming messages.
//
// accept() records a message under its identity (scope + source + consumer +
// message_id) and returns only after that record committed, so a transport may then
// acknowledge the delivery. The worker (a separate component) processes receipts later.
//
// Thread-safety: Inbox is thread-safe; share one per process. Each call borrows a
// connection from the pool for the duration of the call.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "boxcar/inbox/accept_request.hpp"
#include "boxcar/inbox/errors.hpp"
#include "boxcar/inbox/receipt.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/metrics.hpp"

namespace boxcar {

namespace detail {
class AsyncNotifier;
}

/// The largest InboxOptions::max_statement_bytes: accept_many's payloads travel as one
/// jsonb[] array per statement, and PostgreSQL caps a value at 1 GB and a jsonb value at
/// 256 MiB of its binary form, which can be several times the JSON text.
inline constexpr std::size_t kMaxStatementBytesCeiling = 32 * 1024 * 1024;
/// The default InboxOptions::max_statement_bytes.
inline constexpr std::size_t kDefaultMaxStatementBytes = 16 * 1024 * 1024;

struct InboxOptions {
  /// Schema holding inbox_receipts (see boxcar::migrate).
  std::string schema = "boxcar";
  /// Consumers this module declares; accept() rejects any other. Required.
  std::vector<std::string> consumers{};
  /// Payload limits: nesting depth and canonical size.
  CanonicalLimits payload_limits{};
  /// Byte budget of one statement: accept_many() sends a batch as statements of at most
  /// this many bytes of array literals (in one transaction), and an item larger than it alone
  /// (payload, metadata and identity; only when payload_limits.max_bytes allows such) is
  /// refused by accept() and accept_many() with INBOX_ITEM_TOO_LARGE. At most
  /// kMaxStatementBytesCeiling.
  std::size_t max_statement_bytes = kDefaultMaxStatementBytes;
  /// Wake idle workers with NOTIFY after accepting (polling covers it when off).
  bool notify = true;
  /// Where accept results are counted (boxcar_inbox_accept_total); null: nowhere.
  std::shared_ptr<Metrics> metrics{};
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

  /// Durably records `request` in its own transaction (a single autocommit statement
  /// in the common case) and returns after it committed.
  /// - new identity: Receipt{Accepted, id, PENDING};
  /// - same identity, same fingerprint: Receipt{Duplicate, id, current status}, the
  ///   stored row untouched;
  /// @throws InboxValidationError before touching the database (INBOX_ITEM_TOO_LARGE when
  ///   the item exceeds options().max_statement_bytes);
  /// @throws InboxConflictError for the same identity with a different fingerprint;
  /// @throws InboxStorageError when the database fails (uncertain() when the write may
  ///   have committed).
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
  /// The NOTIFY channel workers LISTEN on for this schema.
  static std::string notify_channel(const std::string& schema);

 private:
  std::shared_ptr<ConnectionPool> pool_;
  InboxOptions options_;
  struct Queries;
  std::unique_ptr<Queries> queries_;
  std::unique_ptr<detail::AsyncNotifier> notifier_;

  Receipt accept_unmetered(const AcceptRequest& request);
  void count(const std::string& consumer, std::string_view result) const;
};

}  // namespace boxcar
