// boxcar::Tx — the one transaction type of Boxcar: whoever opens it (the worker,
// application code through ConnectionPool::begin()) commits it. Code that only writes in
// someone else's transaction — inbox handlers (`context.tx`), OutboxEmitter::emit — gets
// a boxcar::TxView of it (tx_view.hpp), which cannot end it. A Tx owns a pooled
// connection and a libpqxx read-committed transaction on it.
//
// Lifetime: RAII. A Tx that is destroyed without commit() rolls back, and its connection
// goes back to the pool only if that rollback succeeded. A Tx begun with
// LoanUse::Application (the default) then has its session reset, so a SET, SET ROLE,
// temporary table or session advisory lock taken in it never reaches the next borrower.
// Thread-safety: none; a Tx is used by one thread at a time. Move-only.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/connection_pool.hpp"

namespace boxcar {

class Tx {
 public:
  /// Begins a transaction on `connection`.
  /// @throws DatabaseError when BEGIN fails.
  explicit Tx(PooledConnection connection);
  Tx(Tx&&) noexcept;
  Tx& operator=(Tx&&) = delete;
  Tx(const Tx&) = delete;
  Tx& operator=(const Tx&) = delete;
  ~Tx();

  /// Runs `sql` with `$1..$n` bound to `args` (never spliced into the text).
  /// @throws pqxx::sql_error and friends, unchanged, so application code sees libpqxx's
  ///   own types; the transaction is then aborted and can only roll back.
  template <typename... Args>
  pqxx::result exec(const std::string& sql, Args&&... args) {
    return work().exec_params(sql, std::forward<Args>(args)...);
  }

  /// Like exec(), through a statement prepared once per connection under `name`, or
  /// unnamed when the pool runs without prepared statements (PooledConnection::exec_named).
  template <typename... Args>
  pqxx::result exec_prepared(const std::string& name, const std::string& sql, Args&&... args) {
    return connection_.exec_named(work(), name, sql, std::forward<Args>(args)...);
  }

  /// The underlying libpqxx transaction, for the owner's code written against libpqxx.
  /// Do not commit or abort it directly: use commit() and rollback(). Not reachable
  /// through a TxView.
  pqxx::work& work();
  /// The connection this transaction runs on (e.g. to cancel a running query from
  /// another thread with cancel_query()).
  pqxx::connection& connection() { return *connection_; }

  /// Commits. Afterwards the Tx is finished and further calls throw std::logic_error.
  /// @throws DatabaseError; uncertain() is true when the connection was lost during
  ///   COMMIT and the outcome is unknown.
  void commit();
  /// Commits like commit(), and resets the session (connection_pool.hpp) in the same
  /// round trip: the loan then ends without a reset of its own. Deferred constraints and
  /// constraint triggers are checked just before the reset, with the transaction's role
  /// and settings (SET CONSTRAINTS ALL IMMEDIATE). The prepared-statement check does not
  /// run: on the connection's PoolOptions::prepared_check_interval-th such loan this
  /// commits plainly instead and the loan ends with the reset that runs it. A loan that is
  /// not reset (LoanUse::BoxcarOnly, PoolOptions::reset_sessions off) just commits. The
  /// worker commits its handler transactions this way (docs/operations.md, "Session
  /// reset").
  /// @throws DatabaseError as commit(); after a failure the connection is closed, not
  ///   reused.
  void commit_and_reset_session();
  /// Rolls back now instead of at destruction. Never throws; a failed rollback closes
  /// the connection instead of returning it to the pool.
  void rollback() noexcept;

  /// True until commit() or rollback().
  bool active() const noexcept { return static_cast<bool>(work_); }

  /// Runs `callback` after this transaction commits successfully (never after a
  /// rollback or an uncertain commit), e.g. to send a NOTIFY wake-up for a row it wrote.
  /// Callbacks run on the committing thread in registration order; exceptions they throw
  /// are swallowed (the commit already happened).
  void on_commit(std::function<void()> callback);
  /// A mark for drop_on_commit_since(): how many callbacks are registered now. Take it
  /// together with a SAVEPOINT.
  std::size_t on_commit_mark() const noexcept { return on_commit_.size(); }
  /// Forgets the callbacks registered after `mark`: after ROLLBACK TO SAVEPOINT their
  /// statements are undone, so they must not run at commit (no NOTIFY, no count for a
  /// row that never committed). Never throws.
  void drop_on_commit_since(std::size_t mark) noexcept;

 private:
  void run_commit_callbacks() noexcept;

  PooledConnection connection_;
  std::unique_ptr<pqxx::work> work_;
  std::vector<std::function<void()>> on_commit_;
};

}  // namespace boxcar
