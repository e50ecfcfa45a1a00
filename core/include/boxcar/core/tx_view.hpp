// boxcar::TxView — a transaction seen by code that writes in it but does not own it: an
// inbox handler (`context.tx`) or OutboxEmitter::emit. It runs statements and registers
// after-commit callbacks; it has no commit(), rollback(), work() or connection(), so the
// owner (the worker, or the application code that called ConnectionPool::begin()) stays
// the only one that ends the transaction. A `Tx&` converts to it implicitly:
//
//   boxcar::Tx tx = pool->begin();
//   outbox.emit(tx, event, options);   // emit(TxView, ...)
//   tx.commit();
//
// A raw `exec("COMMIT")` (or ROLLBACK, END) through a view still reaches the server; the
// worker detects it and makes the receipt DEAD (HANDLER_ENDED_TRANSACTION, docs/worker.md).
// Session-level changes made through a view (SET, set_config(..., false), SET ROLE, temp
// tables, session advisory locks, LISTEN) last until the loan ends: the pool then resets
// the session before the connection serves anyone else (connection_pool.hpp).
//
// Lifetime: non-owning, cheap to copy; valid while the Tx it views is alive.
// Thread-safety: that of the Tx: one thread at a time.
#pragma once

#include <functional>
#include <string>
#include <utility>

#include <pqxx/pqxx>

#include "boxcar/core/tx.hpp"

namespace boxcar {

class TxView {
 public:
  /// Implicit on purpose: a function that writes in the caller's transaction takes a
  /// TxView, and callers pass their Tx.
  TxView(Tx& tx) noexcept : tx_(&tx) {}  // NOLINT(google-explicit-constructor)
  /// A view of a temporary would dangle.
  TxView(Tx&&) = delete;

  /// Runs `sql` with `$1..$n` bound to `args` (never spliced into the text).
  /// @throws pqxx::sql_error and friends, unchanged; the transaction is then aborted
  ///   and its owner rolls it back.
  template <typename... Args>
  pqxx::result exec(const std::string& sql, Args&&... args) const {
    return tx_->exec(sql, std::forward<Args>(args)...);
  }

  /// Like exec(), through a statement prepared once per connection under `name`.
  template <typename... Args>
  pqxx::result exec_prepared(const std::string& name, const std::string& sql, Args&&... args) const {
    return tx_->exec_prepared(name, sql, std::forward<Args>(args)...);
  }

  /// Runs `callback` after the transaction commits (see Tx::on_commit). A callback
  /// registered inside a savepoint that is rolled back never runs.
  void on_commit(std::function<void()> callback) const { tx_->on_commit(std::move(callback)); }

  /// True until the owner commits or rolls back.
  bool active() const noexcept { return tx_->active(); }

 private:
  Tx* tx_;
};

}  // namespace boxcar
