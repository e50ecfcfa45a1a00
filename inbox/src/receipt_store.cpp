// Statement execution for the worker (SQL text lives in worker_queries.hpp).
#include "receipt_store.hpp"

#include <pqxx/pqxx>

#include "boxcar/core/detail/pg_array.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "worker_queries.hpp"

namespace boxcar::detail {
namespace {

using Clock = std::chrono::steady_clock;

// `lease_until`: when the claims' leases end at the earliest (ClaimedReceipt::lease_until).
std::vector<ClaimedReceipt> read_claims(const pqxx::result& rows, Clock::time_point lease_until = {}) {
  std::vector<ClaimedReceipt> claims;
  claims.reserve(rows.size());
  for (const auto& row : rows) {
    claims.push_back(ClaimedReceipt::from_row(row));
    claims.back().lease_until = lease_until;
  }
  return claims;
}

// PostgreSQL array literals of the receipts' ids and claim tokens.
std::string id_array(std::span<const ClaimedReceipt* const> receipts) {
  PgArrayBuilder ids;
  for (const auto* r : receipts) ids.add(r->id);
  return std::move(ids).finish();
}

std::string token_array(std::span<const ClaimedReceipt* const> receipts) {
  PgArrayBuilder tokens;
  for (const auto* r : receipts) tokens.add(std::string_view(r->claim_token));
  return std::move(tokens).finish();
}

// The session and transaction a lock statement ran in (kLock, kLockMany).
ServerSession session_of(const pqxx::row& row) {
  return {.backend_pid = row["backend_pid"].as<int>(), .xact_start_us = row["xact_start_us"].as<std::int64_t>()};
}

}  // namespace

ReceiptStore::ReceiptStore(std::shared_ptr<ConnectionPool> pool, const std::string& schema)
    : pool_(std::move(pool)), schema_(schema) {
  claim_ = detail::with_schema(worker_sql::kClaim, schema);
  claim_fair_ = detail::with_schema(worker_sql::kClaimFair, schema);
  claim_suspect_ = detail::with_schema(worker_sql::kClaimSuspect, schema);
  suspect_due_ = detail::with_schema(worker_sql::kSuspectDue, schema);
  start_solo_ = detail::with_schema(worker_sql::kStartSolo, schema);
  release_ = detail::with_schema(worker_sql::kReleaseExpired, schema);
  lock_ = detail::with_schema(worker_sql::kLock, schema);
  lock_many_ = detail::with_schema(worker_sql::kLockMany, schema);
  complete_ = detail::with_schema(worker_sql::kComplete, schema);
  complete_many_ = detail::with_schema(worker_sql::kCompleteMany, schema);
  transaction_ended_ = worker_sql::kTransactionEnded;
  fail_ = detail::with_schema(worker_sql::kFail, schema);
  hand_back_ = detail::with_schema(worker_sql::kHandBack, schema);
  hand_back_in_outage_ = detail::with_schema(worker_sql::kHandBackInOutage, schema);
  renew_leases_ = detail::with_schema(worker_sql::kRenewLeases, schema);
}

std::vector<ClaimedReceipt> ReceiptStore::claim(const std::string& consumer, std::size_t limit,
                                                std::chrono::milliseconds lease) {
  const auto sent = Clock::now();
  return read_claims(pool_->autocommit("boxcar.worker.claim." + schema_, claim_, consumer,
                                       static_cast<long long>(limit), static_cast<long long>(lease.count())),
                     sent + lease);
}

FairClaim ReceiptStore::claim_fair(const std::string& consumer, std::size_t limit, std::chrono::milliseconds lease,
                                   const ScopeCursor& after) {
  const auto sent = Clock::now();
  const auto rows =
      pool_->autocommit("boxcar.worker.claim_fair." + schema_, claim_fair_, consumer, static_cast<long long>(limit),
                        static_cast<long long>(lease.count()), after.kind, after.id);
  FairClaim out{.claims = read_claims(rows, sent + lease), .next = after};
  if (!rows.empty() && !rows[0]["cursor_kind"].is_null())
    out.next = {.kind = rows[0]["cursor_kind"].c_str(), .id = rows[0]["cursor_id"].c_str()};
  return out;
}

std::optional<ClaimedReceipt> ReceiptStore::claim_suspect(const std::string& consumer,
                                                          std::chrono::milliseconds lease) {
  const auto sent = Clock::now();
  const auto rows = pool_->autocommit("boxcar.worker.claim_suspect." + schema_, claim_suspect_, consumer,
                                      static_cast<long long>(lease.count()));
  if (rows.empty()) return std::nullopt;
  return std::move(read_claims(rows, sent + lease).front());
}

bool ReceiptStore::suspect_due(const std::string& consumer) {
  return pool_->autocommit("boxcar.worker.suspect_due." + schema_, suspect_due_, consumer)[0][0].as<bool>();
}

bool ReceiptStore::start_solo(const ClaimedReceipt& receipt) {
  return pool_->autocommit("boxcar.worker.start_solo." + schema_, start_solo_, receipt.id, receipt.claim_token)
             .affected_rows() == 1;
}

std::vector<ClaimedReceipt> ReceiptStore::release_expired(const std::string& consumer, std::size_t limit,
                                                          int max_attempts) {
  return read_claims(pool_->autocommit("boxcar.worker.release." + schema_, release_, consumer,
                                       static_cast<long long>(limit), max_attempts));
}

bool ReceiptStore::terminate_backend(const ServerSession& session) {
  const auto rows = pool_->autocommit("boxcar.worker.terminate_backend", worker_sql::kTerminateBackend,
                                      session.backend_pid, static_cast<long long>(session.xact_start_us));
  return !rows.empty() && rows[0][0].as<bool>();
}

std::optional<ReceiptStore::LockedReceipt> ReceiptStore::lock(Tx& tx, const ClaimedReceipt& receipt,
                                                              TransactionDeadline deadline) {
  const auto rows =
      tx.exec_prepared("boxcar.worker.lock." + schema_, lock_, receipt.id, receipt.claim_token,
                       std::to_string(deadline.statement_timeout_ms), std::to_string(deadline.idle_timeout_ms));
  if (rows.empty()) return std::nullopt;
  return LockedReceipt{.xact_id = rows[0]["xact_id"].as<std::string>(), .session = session_of(rows[0])};
}

ReceiptStore::LockedBatch ReceiptStore::lock_many(Tx& tx, std::span<const ClaimedReceipt* const> receipts,
                                                  TransactionDeadline deadline) {
  LockedBatch locked;
  for (const auto& row :
       tx.exec_prepared("boxcar.worker.lock_many." + schema_, lock_many_, id_array(receipts), token_array(receipts),
                        std::to_string(deadline.statement_timeout_ms), std::to_string(deadline.idle_timeout_ms))) {
    locked.ids.push_back(row["id"].as<std::int64_t>());
    locked.xact_id = row["xact_id"].as<std::string>();
    locked.session = session_of(row);
  }
  return locked;
}

ReceiptStore::Completion ReceiptStore::complete(Tx& tx, const ClaimedReceipt& receipt, const std::string& xact_id) {
  const auto rows =
      tx.exec_prepared("boxcar.worker.complete." + schema_, complete_, receipt.id, receipt.claim_token, xact_id);
  Completion completion;
  for (const auto& row : rows) completion.receipts.emplace_back(receipt.id, row["age_seconds"].as<double>());
  return completion;
}

ReceiptStore::Completion ReceiptStore::complete_many(Tx& tx, std::span<const ClaimedReceipt* const> receipts,
                                                     const std::string& xact_id) {
  // Ordered receipts hand their keys on in the same statement, first; their completion's
  // row trigger then finds each key moved on and has nothing to do.
  std::vector<const ClaimedReceipt*> ordered;
  for (const auto* r : receipts)
    if (r->ordered) ordered.push_back(r);
  const auto rows = tx.exec_prepared("boxcar.worker.complete_many." + schema_, complete_many_, id_array(receipts),
                                     token_array(receipts), xact_id, id_array(ordered), token_array(ordered));
  Completion completion;
  for (const auto& row : rows)
    completion.receipts.emplace_back(row["id"].as<std::int64_t>(), row["age_seconds"].as<double>());
  return completion;
}

bool ReceiptStore::transaction_ended(Tx& tx, const std::string& xact_id) {
  return tx.exec_prepared("boxcar.worker.transaction_ended", transaction_ended_, xact_id)[0][0].as<bool>();
}

std::optional<std::string> ReceiptStore::fail(Tx* tx, const ClaimedReceipt& receipt, const FailureRecord& failure,
                                              int max_attempts) {
  const std::string name = "boxcar.worker.fail." + schema_;
  const auto delay = static_cast<long long>(failure.retry_delay.count());
  const pqxx::result rows =
      tx ? tx->exec_prepared(name, fail_, receipt.id, receipt.claim_token, delay, failure.permanent, max_attempts,
                             failure.error_type, failure.message, failure.dead_reason)
         : pool_->autocommit(name, fail_, receipt.id, receipt.claim_token, delay, failure.permanent, max_attempts,
                             failure.error_type, failure.message, failure.dead_reason);
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<std::string>();
}

std::size_t ReceiptStore::hand_back(std::span<const ClaimedReceipt* const> receipts, std::chrono::milliseconds delay) {
  // A receipt without a claim token has nothing to return: its "" is no uuid, and one
  // such element would fail the whole statement.
  std::vector<const ClaimedReceipt*> claimed;
  for (const auto* r : receipts)
    if (!r->claim_token.empty()) claimed.push_back(r);
  if (claimed.empty()) return 0;
  return pool_
      ->autocommit("boxcar.worker.hand_back." + schema_, hand_back_, id_array(claimed), token_array(claimed),
                   static_cast<long long>(delay.count()))
      .affected_rows();
}

std::optional<int> ReceiptStore::hand_back_in_outage(const ClaimedReceipt& receipt, int max_hand_backs,
                                                     const BackoffOptions& backoff) {
  if (receipt.claim_token.empty()) return std::nullopt;
  const auto rows = pool_->autocommit("boxcar.worker.hand_back_in_outage." + schema_, hand_back_in_outage_, receipt.id,
                                      receipt.claim_token, max_hand_backs, static_cast<long long>(backoff.base.count()),
                                      static_cast<long long>(backoff.cap.count()));
  if (rows.empty()) return std::nullopt;
  return rows[0][0].as<int>();
}

std::size_t ReceiptStore::hand_back(std::span<const ClaimedReceipt> receipts) {
  std::vector<const ClaimedReceipt*> pointers;
  for (const auto& r : receipts) pointers.push_back(&r);
  return hand_back(pointers);
}

std::size_t ReceiptStore::renew_leases(std::span<const ClaimedReceipt* const> receipts,
                                       std::chrono::milliseconds lease) {
  if (receipts.empty()) return 0;
  return pool_
      ->autocommit("boxcar.worker.renew_leases." + schema_, renew_leases_, id_array(receipts), token_array(receipts),
                   static_cast<long long>(lease.count()))
      .affected_rows();
}

}  // namespace boxcar::detail
