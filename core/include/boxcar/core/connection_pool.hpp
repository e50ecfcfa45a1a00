// A bounded pool of PostgreSQL connections shared by every Boxcar component in a process.
//
// Connections are opened lazily up to `size`, checked before they are handed out (a
// connection the server closed while it sat idle is replaced), and closed instead of
// returned when their last transaction did not end cleanly, so the next user never
// inherits an open, aborted or broken session. A loan that may have run application code
// (a handler's transaction, a Tx from begin(), a raw acquire()) has its session reset
// before the connection is reused, as PgBouncer's server_reset_query does: settings,
// role, temporary tables, session advisory locks, LISTENs, cursors (docs/operations.md,
// "Session reset").
//
// Thread-safety: ConnectionPool is thread-safe. A PooledConnection belongs to one thread
// at a time, like the pqxx::connection it wraps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <pqxx/pqxx>

namespace boxcar {

class Tx;

struct PoolOptions {
  /// libpq connection string or URL (postgresql://user@host:port/db).
  std::string url{};
  /// Where the connections that need a whole session of their own go: the wake-up
  /// listeners (LISTEN) here; the migration runner (session advisory lock) through the
  /// runtime's `boxcar migrate`. Empty: `url`. Behind PgBouncer in transaction pooling,
  /// point it at PostgreSQL directly (docs/operations.md, "PgBouncer").
  std::string session_url{};
  /// Most connections open at once.
  std::size_t size = 8;
  /// How long acquire() waits for a free connection before DATABASE_POOL_TIMEOUT.
  std::chrono::milliseconds acquire_timeout{5000};
  /// libpq parameters added to `url` unless it sets them already: fail fast on a dead
  /// network instead of hanging a claim past its lease (see docs/operations.md).
  std::string default_parameters =
      "connect_timeout=10 keepalives=1 keepalives_idle=10 keepalives_interval=5 "
      "keepalives_count=3 tcp_user_timeout=30000 application_name=boxcar";
  /// Reset the session of every LoanUse::Application loan before the connection is reused
  /// (one extra round trip per such loan; none when its last transaction committed with
  /// Tx::commit_and_reset_session, as the worker's handler transactions do, except on
  /// every prepared_check_interval-th). Turning it off lets one handler's SET, SET ROLE,
  /// temporary tables or advisory locks reach the next borrower; it exists to measure the
  /// reset's cost (bench/worker.cpp), not for production.
  bool reset_sessions = true;
  /// Run named statements as server-side prepared statements (parsed once per
  /// connection). false: as unnamed parameterised statements (Parse/Bind/Execute with no
  /// name, libpqxx exec_params), which survive a pooler that hands each transaction to
  /// another server connection (PgBouncer 1.18 in transaction pooling), at the cost of a
  /// parse per execution.
  bool prepared_statements = true;
  /// How often the pool lists a connection's server-side prepared statements to compare
  /// them with the ones it prepared, for loans whose last transaction committed with
  /// Tx::commit_and_reset_session (the worker's handler transactions): on every
  /// `prepared_check_interval`-th such loan of the connection, which then commits plainly
  /// and is reset, with the check, as it ends. 1: every loan. Every other loan that may
  /// have run application code is checked as it ends. In between, a statement that
  /// application code prepared or deallocated by hand and that one of the pool's
  /// statements then runs into fails that statement and closes the connection
  /// (docs/operations.md, "Session reset"). The list is a set-returning function the
  /// server runs per check, which cost about a sixth of a one-message loop's throughput
  /// when every handler transaction ran it (docs/benchmarks.md, "The per-message
  /// transaction").
  std::size_t prepared_check_interval = 32;
};

/// Who runs statements on a loan, which decides whether its session is reset afterwards.
enum class LoanUse {
  /// Code Boxcar does not control may run anything on it (a handler, application code
  /// holding the Tx or the connection): the session is reset before the connection is
  /// reused. The default of acquire() and begin().
  Application,
  /// Only Boxcar's own statements, which change nothing that outlives their transaction
  /// (SET LOCAL, set_config(..., true), no session locks, temp tables or LISTEN): no reset.
  /// Never for a loan that reaches application code.
  BoxcarOnly,
};

/// `url` with every parameter of `parameters` ("key=value key=value") that it does not
/// set already; works for URLs and key=value strings alike.
std::string with_default_parameters(const std::string& url, const std::string& parameters);

class ConnectionPool;

/// A connection on loan from the pool; returns it when destroyed. Move-only.
class PooledConnection {
 public:
  PooledConnection() = default;
  PooledConnection(PooledConnection&&) noexcept;
  PooledConnection& operator=(PooledConnection&&) noexcept;
  PooledConnection(const PooledConnection&) = delete;
  PooledConnection& operator=(const PooledConnection&) = delete;
  ~PooledConnection();

  pqxx::connection& operator*() const { return *connection_; }
  pqxx::connection* operator->() const { return connection_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(connection_); }

  /// Prepares `sql` under `name` on this connection the first time it is asked for, so
  /// hot statements are parsed once per connection. Names must be unique per SQL text.
  void prepare_once(const std::string& name, const std::string& sql);

  /// Runs the named statement `name` (text `sql`, one name per text) in `transaction`,
  /// which runs on this connection: prepared once per connection (prepare_once), or,
  /// when the pool's PoolOptions::prepared_statements is false, as an unnamed
  /// parameterised statement. Every named statement of Boxcar goes through here. A
  /// statement the server refuses because its prepared statements are not the ones the
  /// pool prepared on this connection (application code ran PREPARE or DEALLOCATE by hand)
  /// closes the connection as the loan ends.
  /// @throws pqxx exceptions, unchanged.
  template <typename... Args>
  pqxx::result exec_named(pqxx::transaction_base& transaction, const std::string& name, const std::string& sql,
                          Args&&... args) {
    if (!prepared_statements_) return transaction.exec_params(sql, std::forward<Args>(args)...);
    try {
      prepare_once(name, sql);
      return transaction.exec_prepared(name, std::forward<Args>(args)...);
    } catch (const pqxx::sql_error& e) {
      if (prepared_statements_diverged(e)) discard();
      throw;
    }
  }

  /// Marks the connection unusable: it is closed instead of returned.
  void discard() noexcept { discard_ = true; }

  /// True when the session is reset as the loan ends (LoanUse::Application with
  /// PoolOptions::reset_sessions) and that reset has not happened yet.
  bool resets_on_return() const noexcept { return reset_on_return_; }
  /// True when this loan is the connection's PoolOptions::prepared_check_interval-th since
  /// its prepared statements were last listed: it must end with the reset that lists them,
  /// not with Tx::commit_and_reset_session's.
  bool prepared_check_due() const noexcept { return unchecked_loans_ + 1 >= prepared_check_interval_; }
  /// Records that the loan's last transaction reset the session as it committed
  /// (Tx::commit_and_reset_session): the loan ends without a reset round trip or a
  /// prepared-statement check, and counts toward the next check. Never throws.
  void session_reset_by_commit() noexcept;

 private:
  friend class ConnectionPool;
  struct Slot {
    std::unique_ptr<pqxx::connection> connection;
    std::unordered_set<std::string> prepared;
    /// Loans reset by their COMMIT since the prepared-statement check last ran.
    std::size_t unchecked_loans = 0;
  };
  static bool prepared_statements_diverged(const pqxx::sql_error& error) noexcept;
  PooledConnection(std::shared_ptr<ConnectionPool> pool, Slot slot, bool reset_on_return);

  std::shared_ptr<ConnectionPool> pool_;
  std::unique_ptr<pqxx::connection> connection_;
  std::unordered_set<std::string> prepared_;
  bool discard_ = false;
  bool reset_on_return_ = true;
  bool prepared_statements_ = true;
  std::size_t unchecked_loans_ = 0;
  std::size_t prepared_check_interval_ = 1;
};

class ConnectionPool : public std::enable_shared_from_this<ConnectionPool> {
 public:
  /// @throws ConfigError for an empty url or a zero size. Opens no connection yet.
  static std::shared_ptr<ConnectionPool> create(PoolOptions options);

  /// Borrows a connection, opening one if fewer than `size` exist.
  /// Blocks up to acquire_timeout. When the loan ends, a LoanUse::Application connection's
  /// session is reset (PoolOptions::reset_sessions) on the returning thread; a connection
  /// whose reset fails is closed instead of reused.
  /// @throws DatabaseError DATABASE_POOL_TIMEOUT when none frees up in time,
  ///   DATABASE_UNAVAILABLE when a new connection cannot be opened.
  PooledConnection acquire(LoanUse use = LoanUse::Application);

  /// acquire() and begin a read-committed transaction on it.
  Tx begin(LoanUse use = LoanUse::Application);

  /// Runs the named statement `name` (PooledConnection::exec_named) on its own, outside any
  /// transaction block: one round trip, committed when it returns. A connection whose
  /// statement failed is closed instead of returned. For Boxcar's own statements only
  /// (LoanUse::BoxcarOnly: no session reset afterwards).
  /// @throws DatabaseError from acquire(); pqxx exceptions from the statement, unchanged
  ///   (a lost connection during a write leaves its outcome unknown).
  template <typename... Args>
  pqxx::result autocommit(const std::string& name, const std::string& sql, Args&&... args);

  const PoolOptions& options() const noexcept { return options_; }
  /// The libpq connection string actually used (url plus default_parameters), for
  /// components that keep a dedicated connection outside the pool (LISTEN, NOTIFY).
  const std::string& connection_string() const noexcept { return connection_string_; }
  /// Like connection_string(), from session_url when it is set: for the dedicated
  /// connections that need a session of their own (LISTEN). The NOTIFY sender needs none
  /// and uses connection_string().
  const std::string& session_connection_string() const noexcept { return session_connection_string_; }
  /// Connections currently open (idle and lent), not counting abandoned loans.
  std::size_t open_connections() const;

  /// Stops counting `connection`, which is on loan, toward `size`: a thread that will
  /// keep it indefinitely (a worker's abandoned handler) then no longer shrinks the pool.
  /// When that loan ends the connection is closed, never reused. The caller must know the
  /// loan is still outstanding (e.g. hold a lock the borrower needs before giving it back).
  void abandon_loan(const pqxx::connection& connection);

  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

 private:
  friend class PooledConnection;
  explicit ConnectionPool(PoolOptions options);
  void give_back(PooledConnection::Slot slot, bool reusable) noexcept;

  PoolOptions options_;
  std::string connection_string_{};
  std::string session_connection_string_{};
  mutable std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<PooledConnection::Slot> idle_;
  std::size_t open_ = 0;
  std::unordered_set<const pqxx::connection*> abandoned_;
};

template <typename... Args>
pqxx::result ConnectionPool::autocommit(const std::string& name, const std::string& sql, Args&&... args) {
  PooledConnection connection = acquire(LoanUse::BoxcarOnly);
  try {
    pqxx::nontransaction statement(*connection);
    return connection.exec_named(statement, name, sql, std::forward<Args>(args)...);
  } catch (...) {
    connection.discard();
    throw;
  }
}

}  // namespace boxcar
