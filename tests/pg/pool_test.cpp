#include <catch2/catch.hpp>

#include <thread>

#include "boxcar/core/error.hpp"
#include "boxcar/core/tx.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::TestDatabase;

namespace {
void make_table(TestDatabase& db) { db.query("CREATE TABLE {schema}.things (id int PRIMARY KEY, name text)"); }
}  // namespace

TEST_CASE("a committed Tx persists its parameterised writes") {
  TestDatabase db;
  make_table(db);
  auto pool = db.pool(2);
  {
    Tx tx = pool->begin();
    tx.exec(db.qualified("INSERT INTO {schema}.things VALUES ($1, $2)"), 1, "it's; DROP TABLE x");
    tx.commit();
    CHECK_FALSE(tx.active());
    CHECK_THROWS_AS(tx.work(), std::logic_error);
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.things WHERE name = 'it''s; DROP TABLE x'") == 1);
}

TEST_CASE("a Tx destroyed without commit rolls back") {
  TestDatabase db;
  make_table(db);
  auto pool = db.pool(2);
  {
    Tx tx = pool->begin();
    tx.exec(db.qualified("INSERT INTO {schema}.things VALUES ($1, $2)"), 1, "a");
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.things") == 0);
}

TEST_CASE("a connection whose transaction aborted is handed out clean") {
  TestDatabase db;
  make_table(db);
  auto pool = db.pool(1);
  int first_backend = 0;
  {
    Tx tx = pool->begin();
    first_backend = tx.connection().backendpid();
    CHECK_THROWS(tx.exec("SELECT 1/0"));
  }
  Tx tx = pool->begin();
  CHECK(tx.connection().backendpid() == first_backend);  // reused, not reopened
  // Not inside the old transaction: it sees a fresh snapshot and can write and commit.
  tx.exec(db.qualified("INSERT INTO {schema}.things VALUES (1, 'x')"));
  tx.commit();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.things") == 1);
}

TEST_CASE("a pooled connection terminated by the server is replaced on the next loan") {
  TestDatabase db;
  auto pool = db.pool(1);
  int backend = 0;
  {
    Tx tx = pool->begin();
    backend = tx.connection().backendpid();
    tx.commit();
  }
  {
    auto admin = db.connect();
    pqxx::nontransaction(admin).exec_params("SELECT pg_terminate_backend($1)", backend);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  Tx tx = pool->begin();
  CHECK(tx.connection().backendpid() != backend);
  CHECK(tx.exec("SELECT 41 + 1")[0][0].as<int>() == 42);
  tx.commit();
  CHECK(pool->open_connections() == 1);
}

TEST_CASE("the pool is bounded and times out instead of opening more connections") {
  TestDatabase db;
  auto pool = ConnectionPool::create({.url = db.url(), .size = 2, .acquire_timeout = std::chrono::milliseconds(200)});
  auto a = pool->acquire();
  auto b = pool->acquire();
  CHECK(pool->open_connections() == 2);
  try {
    auto c = pool->acquire();
    FAIL("expected DATABASE_POOL_TIMEOUT");
  } catch (const DatabaseError& e) {
    CHECK(e.code() == "DATABASE_POOL_TIMEOUT");
  }
  // Returning one lets a waiter through.
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    a = PooledConnection();
  });
  auto c = pool->acquire();
  releaser.join();
  CHECK(c);
  CHECK(pool->open_connections() == 2);
}

TEST_CASE("an unreachable database is reported as DATABASE_UNAVAILABLE") {
  auto pool = ConnectionPool::create({.url = "postgresql://nobody@127.0.0.1:1/none"});
  try {
    pool->acquire();
    FAIL("expected DatabaseError");
  } catch (const DatabaseError& e) {
    CHECK(e.code() == "DATABASE_UNAVAILABLE");
    CHECK_FALSE(e.uncertain());
  }
  CHECK(pool->open_connections() == 0);
}

TEST_CASE("prepared statements are prepared once per connection and survive reuse") {
  TestDatabase db;
  make_table(db);
  auto pool = db.pool(1);
  const std::string sql = db.qualified("INSERT INTO {schema}.things VALUES ($1, $2)");
  for (int i = 0; i < 3; ++i) {
    Tx tx = pool->begin();
    tx.exec_prepared("test.insert", sql, i, "n");
    tx.commit();
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.things") == 3);
}
