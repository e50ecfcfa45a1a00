// The bounded connection pool: lazy open, health check on loan, session reset or close on return.
#include "boxcar/core/connection_pool.hpp"

#include <poll.h>

#include <sstream>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/tx.hpp"
#include "session_reset.hpp"

namespace boxcar {

std::string with_default_parameters(const std::string& url, const std::string& parameters) {
  const bool is_url = url.starts_with("postgresql://") || url.starts_with("postgres://");
  std::string result = url;
  std::istringstream words(parameters);
  std::string pair;
  while (words >> pair) {
    const auto eq = pair.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = pair.substr(0, eq);
    const bool present =
        is_url ? (url.find("?" + key + "=") != std::string::npos || url.find("&" + key + "=") != std::string::npos)
               : (url.find(key + "=") != std::string::npos);
    if (present) continue;
    if (is_url) {
      result += (result.find('?') == std::string::npos ? '?' : '&');
      result += pair;
    } else {
      result += (result.empty() ? "" : " ") + pair;
    }
  }
  return result;
}

namespace {

// A connection that the server closed (terminated backend, restart) while it sat idle
// has a readable socket: the server's goodbye or EOF. Pooled connections do not LISTEN
// (a loan that may have run LISTEN is reset with UNLISTEN * before it is reused), so
// nothing else arrives unasked.
bool looks_healthy(const pqxx::connection& connection) {
  if (!connection.is_open()) return false;
  pollfd fd{connection.sock(), POLLIN, 0};
  const int ready = ::poll(&fd, 1, 0);
  return ready == 0;
}

}  // namespace

PooledConnection::PooledConnection(std::shared_ptr<ConnectionPool> pool, Slot slot, bool reset_on_return)
    : pool_(std::move(pool)),
      connection_(std::move(slot.connection)),
      prepared_(std::move(slot.prepared)),
      reset_on_return_(reset_on_return),
      prepared_statements_(pool_->options().prepared_statements),
      unchecked_loans_(slot.unchecked_loans),
      prepared_check_interval_(pool_->options().prepared_check_interval) {}

PooledConnection::PooledConnection(PooledConnection&& other) noexcept
    : pool_(std::move(other.pool_)),
      connection_(std::move(other.connection_)),
      prepared_(std::move(other.prepared_)),
      discard_(other.discard_),
      reset_on_return_(other.reset_on_return_),
      prepared_statements_(other.prepared_statements_),
      unchecked_loans_(other.unchecked_loans_),
      prepared_check_interval_(other.prepared_check_interval_) {}

PooledConnection& PooledConnection::operator=(PooledConnection&& other) noexcept {
  if (this != &other) {
    PooledConnection old(std::move(*this));
    pool_ = std::move(other.pool_);
    connection_ = std::move(other.connection_);
    prepared_ = std::move(other.prepared_);
    discard_ = other.discard_;
    reset_on_return_ = other.reset_on_return_;
    prepared_statements_ = other.prepared_statements_;
    unchecked_loans_ = other.unchecked_loans_;
    prepared_check_interval_ = other.prepared_check_interval_;
  }
  return *this;
}

PooledConnection::~PooledConnection() {
  if (!pool_) return;
  bool reusable = !discard_ && connection_ && connection_->is_open();
  // On the returning thread, outside the pool's lock: a failed reset closes the connection.
  if (reusable && reset_on_return_) {
    reusable = detail::reset_session(*connection_, prepared_);
    unchecked_loans_ = 0;  // the reset's last statement listed them
  }
  pool_->give_back(PooledConnection::Slot{std::move(connection_), std::move(prepared_), unchecked_loans_}, reusable);
}

void PooledConnection::session_reset_by_commit() noexcept {
  reset_on_return_ = false;
  ++unchecked_loans_;
}

bool PooledConnection::prepared_statements_diverged(const pqxx::sql_error& error) noexcept {
  // 26000 invalid_sql_statement_name: one the pool prepared is gone (a DEALLOCATE by hand);
  // 42P05 duplicate_prepared_statement: its name is taken (a PREPARE by hand).
  const std::string state = detail::sqlstate_of(error);
  return state == "26000" || state == "42P05";
}

void PooledConnection::prepare_once(const std::string& name, const std::string& sql) {
  if (prepared_.contains(name)) return;
  connection_->prepare(name, sql);
  prepared_.insert(name);
}

std::shared_ptr<ConnectionPool> ConnectionPool::create(PoolOptions options) {
  if (options.url.empty()) throw ConfigError("database.url", "a PostgreSQL URL is required");
  if (options.size == 0) throw ConfigError("pool.size", "must be at least 1");
  if (options.prepared_check_interval == 0) throw ConfigError("pool.prepared_check_interval", "must be at least 1");
  return std::shared_ptr<ConnectionPool>(new ConnectionPool(std::move(options)));
}

ConnectionPool::ConnectionPool(PoolOptions options)
    : options_(std::move(options)),
      connection_string_(with_default_parameters(options_.url, options_.default_parameters)),
      session_connection_string_(options_.session_url.empty()
                                     ? connection_string_
                                     : with_default_parameters(options_.session_url, options_.default_parameters)) {}

PooledConnection ConnectionPool::acquire(LoanUse use) {
  const bool reset = use == LoanUse::Application && options_.reset_sessions;
  std::unique_lock lock(mutex_);
  const auto deadline = std::chrono::steady_clock::now() + options_.acquire_timeout;
  while (true) {
    while (!idle_.empty()) {
      PooledConnection::Slot slot = std::move(idle_.back());
      idle_.pop_back();
      // The check is a system call: made outside the lock every loan and return takes, so
      // that handler threads do not queue behind it. The connection still counts in open_
      // meanwhile, as a loan.
      lock.unlock();
      if (looks_healthy(*slot.connection)) return PooledConnection(shared_from_this(), std::move(slot), reset);
      slot.connection.reset();  // dropped: closed, outside the lock
      lock.lock();
      --open_;
    }
    if (open_ < options_.size) {
      ++open_;
      lock.unlock();
      try {
        PooledConnection::Slot slot{detail::open_connection(connection_string_), {}};
        return PooledConnection(shared_from_this(), std::move(slot), reset);
      } catch (...) {
        lock.lock();
        --open_;
        freed_.notify_one();
        throw detail::to_database_error(std::current_exception(), "opening a database connection", false);
      }
    }
    if (freed_.wait_until(lock, deadline) == std::cv_status::timeout && idle_.empty() && open_ >= options_.size) {
      throw DatabaseError("DATABASE_POOL_TIMEOUT", "no database connection became free within " +
                                                       std::to_string(options_.acquire_timeout.count()) +
                                                       " ms (pool.size = " + std::to_string(options_.size) + ")");
    }
  }
}

Tx ConnectionPool::begin(LoanUse use) { return Tx(acquire(use)); }

std::size_t ConnectionPool::open_connections() const {
  std::lock_guard lock(mutex_);
  return open_;
}

void ConnectionPool::abandon_loan(const pqxx::connection& connection) {
  {
    std::lock_guard lock(mutex_);
    if (!abandoned_.insert(&connection).second) return;
    --open_;
  }
  freed_.notify_one();
}

void ConnectionPool::give_back(PooledConnection::Slot slot, bool reusable) noexcept {
  {
    std::lock_guard lock(mutex_);
    if (abandoned_.erase(slot.connection.get()) > 0) {
      // Already uncounted by abandon_loan(): closed below, whatever state it is in.
    } else if (reusable) {
      idle_.push_back(std::move(slot));
    } else {
      --open_;
    }
  }
  freed_.notify_one();
  // A non-reusable slot's connection closes here, outside the lock.
}

}  // namespace boxcar
