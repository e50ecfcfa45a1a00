// The RAII transaction over a pooled connection.
#include "boxcar/core/tx.hpp"

#include <stdexcept>

#include "boxcar/core/detail/database_errors.hpp"
#include "core_queries.hpp"
#include "transaction_work.hpp"

namespace boxcar {

Tx::Tx(PooledConnection connection) : connection_(std::move(connection)) {
  try {
    work_ = std::make_unique<detail::TransactionWork>(*connection_);
  } catch (...) {
    connection_.discard();
    throw detail::to_database_error(std::current_exception(), "beginning a transaction", false);
  }
}

Tx::Tx(Tx&& other) noexcept
    : connection_(std::move(other.connection_)),
      work_(std::move(other.work_)),
      on_commit_(std::move(other.on_commit_)) {}

Tx::~Tx() { rollback(); }

pqxx::work& Tx::work() {
  if (!work_) throw std::logic_error("boxcar::Tx used after commit() or rollback()");
  return *work_;
}

void Tx::commit() {
  pqxx::work& transaction = work();
  try {
    transaction.commit();
  } catch (...) {
    // A failed COMMIT leaves no transaction open; a lost connection is noticed by the
    // pool (is_open() is false) and closed there.
    work_.reset();
    throw detail::to_database_error(std::current_exception(), "committing", true);
  }
  work_.reset();
  run_commit_callbacks();
}

void Tx::commit_and_reset_session() {
  if (!connection_.resets_on_return() || connection_.prepared_check_due()) return commit();
  auto& transaction = static_cast<detail::TransactionWork&>(work());
  transaction.set_commit_command(detail::core_sql::kCommitAndResetSession);
  try {
    transaction.commit();
  } catch (...) {
    // A reset statement that failed aborted the transaction block before its COMMIT,
    // and libpqxx sends no ROLLBACK after a failed commit: only a new session is clean.
    work_.reset();
    connection_.discard();
    throw detail::to_database_error(std::current_exception(), "committing", true);
  }
  work_.reset();
  connection_.session_reset_by_commit();
  run_commit_callbacks();
}

void Tx::run_commit_callbacks() noexcept {
  auto callbacks = std::move(on_commit_);
  for (auto& callback : callbacks) {
    try {
      callback();
    } catch (...) {
      // The transaction committed; a failing hook must not report otherwise.
    }
  }
}

void Tx::on_commit(std::function<void()> callback) {
  if (!work_) throw std::logic_error("boxcar::Tx::on_commit after commit() or rollback()");
  on_commit_.push_back(std::move(callback));
}

void Tx::drop_on_commit_since(std::size_t mark) noexcept {
  if (mark < on_commit_.size())
    on_commit_.erase(on_commit_.begin() + static_cast<std::ptrdiff_t>(mark), on_commit_.end());
}

void Tx::rollback() noexcept {
  if (!work_) return;
  try {
    work_->abort();
  } catch (...) {
    connection_.discard();
  }
  work_.reset();
  on_commit_.clear();
}

}  // namespace boxcar
