// Shared pieces of the session-reset tests: a pool of one connection, so the next
// borrower is the same backend unless the pool closed it, and a role to SET ROLE to.
#pragma once

#include <memory>
#include <string>

#include <pqxx/pqxx>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/tx.hpp"
#include "test_database.hpp"

namespace boxcar::testing {

/// `prepared_check_interval`: PoolOptions'; the default unless a test needs the check sooner.
inline std::shared_ptr<ConnectionPool> pool_of_one(
    const TestDatabase& db, std::size_t prepared_check_interval = PoolOptions{}.prepared_check_interval) {
  return ConnectionPool::create({.url = db.url(), .size = 1, .prepared_check_interval = prepared_check_interval});
}

/// The backend a fresh loan of `pool` runs on.
inline int backend_of(ConnectionPool& pool) {
  Tx tx = pool.begin();
  const int pid = tx.connection().backendpid();
  tx.commit();
  return pid;
}

/// A NOLOGIN role the superuser test session can SET ROLE to; roles are cluster-wide, so
/// parallel test processes may race to create it.
inline void ensure_role(const TestDatabase& db, const std::string& role) {
  auto admin = db.connect();
  pqxx::nontransaction(admin).exec("DO $$ BEGIN CREATE ROLE " + role +
                                   " NOLOGIN; EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$");
}

}  // namespace boxcar::testing
