// The pool's session reset: whatever a loan that may have run application code changed in
// its session (settings, role, temp tables, advisory locks, LISTEN, hand-made prepared
// statements) is gone for the next borrower of the same connection. Pools of size 1, so
// the next borrower is the same backend (checked by its pid) unless the pool closed it.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/tx.hpp"
#include "boxcar/inbox/worker.hpp"
#include "pool_session.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

// One value the next borrower reads, and the backend it read it on.
struct Seen {
  std::string value;
  int backend = 0;
};

Seen next_borrower_sees(ConnectionPool& pool, const std::string& sql) {
  Tx tx = pool.begin();
  Seen seen{.value = tx.exec(sql)[0][0].c_str(), .backend = tx.connection().backendpid()};
  tx.commit();
  return seen;
}

}  // namespace

TEST_CASE("a SET statement_timeout made on a loan does not reach the next borrower") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const auto before = next_borrower_sees(*pool, "SELECT current_setting('statement_timeout')");
  {
    Tx tx = pool->begin();
    tx.exec("SET statement_timeout = '1234ms'");
    CHECK(tx.exec("SELECT current_setting('statement_timeout')")[0][0].as<std::string>() == "1234ms");
    tx.commit();
  }
  const auto after = next_borrower_sees(*pool, "SELECT current_setting('statement_timeout')");
  CHECK(after.backend == before.backend);  // the same session, reset rather than replaced
  CHECK(after.value == before.value);
}

TEST_CASE("set_config(..., false) on a loan does not reach the next borrower, even a read-only default") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const auto before = next_borrower_sees(*pool, "SELECT current_setting('search_path')");
  {
    Tx tx = pool->begin();
    tx.exec(
        "SELECT set_config('search_path', 'pg_catalog', false), "
        "set_config('default_transaction_read_only', 'on', false)");
    tx.commit();
  }
  const auto after = next_borrower_sees(*pool, "SELECT current_setting('search_path')");
  CHECK(after.backend == before.backend);
  CHECK(after.value == before.value);
  // The next borrower can write: its transactions are not read-only.
  Tx tx = pool->begin();
  tx.exec(db.qualified("CREATE TABLE {schema}.written (id int)"));
  tx.commit();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.written") == 0);
}

TEST_CASE("SET ROLE on a loan does not reach the next borrower") {
  TestDatabase db;
  ensure_role(db, "boxcar_pool_test_role");
  auto pool = pool_of_one(db);
  const auto before = next_borrower_sees(*pool, "SELECT current_user");
  {
    Tx tx = pool->begin();
    tx.exec("SET ROLE boxcar_pool_test_role");
    CHECK(tx.exec("SELECT current_user")[0][0].as<std::string>() == "boxcar_pool_test_role");
    tx.commit();
  }
  const auto after = next_borrower_sees(*pool, "SELECT current_user");
  CHECK(after.backend == before.backend);
  CHECK(after.value == before.value);
  CHECK(after.value != "boxcar_pool_test_role");
}

TEST_CASE("a temporary table created on a loan is gone for the next borrower") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const int backend = backend_of(*pool);
  {
    Tx tx = pool->begin();
    tx.exec("CREATE TEMP TABLE pool_scratch (id int)");  // ON COMMIT PRESERVE ROWS: outlives the transaction
    tx.exec("INSERT INTO pool_scratch VALUES (1)");
    tx.commit();
  }
  const auto after = next_borrower_sees(*pool, "SELECT to_regclass('pg_temp.pool_scratch') IS NULL");
  CHECK(after.backend == backend);
  CHECK(after.value == "t");
}

TEST_CASE("a session advisory lock taken on a loan is released before the next borrower") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const int backend = backend_of(*pool);
  {
    Tx tx = pool->begin();
    tx.exec("SELECT pg_advisory_lock(4242)");
    tx.commit();
  }
  const auto after =
      next_borrower_sees(*pool, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()");
  CHECK(after.backend == backend);
  CHECK(after.value == "0");
  // And anyone else can take it.
  auto other = db.connect();
  CHECK(pqxx::nontransaction(other).exec("SELECT pg_try_advisory_lock(4242)")[0][0].as<bool>());
}

TEST_CASE("a LISTEN made on a loan is gone for the next borrower") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const int backend = backend_of(*pool);
  {
    Tx tx = pool->begin();
    tx.exec("LISTEN boxcar_pool_test_channel");
    tx.commit();
  }
  const auto after = next_borrower_sees(*pool, "SELECT count(*) FROM pg_listening_channels()");
  CHECK(after.backend == backend);
  CHECK(after.value == "0");
}

TEST_CASE("a raw acquire() loan is reset too") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  const int backend = backend_of(*pool);
  {
    auto connection = pool->acquire();
    pqxx::nontransaction(*connection).exec("SET work_mem = '77MB'");
  }
  const auto after = next_borrower_sees(*pool, "SELECT current_setting('work_mem')");
  CHECK(after.backend == backend);
  CHECK(after.value != "77MB");
}

TEST_CASE("statements prepared through the pool survive the reset and are not prepared again") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  for (int i = 0; i < 3; ++i) {
    Tx tx = pool->begin();
    CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 41)[0][0].as<int>() == 42);
    tx.exec("SET statement_timeout = '5s'");
    tx.commit();
  }
  Tx tx = pool->begin();
  // Still the one server-side statement, registered once: a second PREPARE would have failed.
  CHECK(tx.exec("SELECT count(*) FROM pg_prepared_statements WHERE name = 'test.answer'")[0][0].as<int>() == 1);
  tx.commit();
}

TEST_CASE("a loan that deallocated the pool's prepared statements leaves a working connection behind") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  {
    Tx tx = pool->begin();
    CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 1)[0][0].as<int>() == 2);
    tx.exec("DEALLOCATE ALL");  // behind libpqxx's back: it still believes test.answer registered
    tx.commit();
  }
  Tx tx = pool->begin();
  CHECK(tx.exec_prepared("test.answer", "SELECT $1::int + 1", 41)[0][0].as<int>() == 42);
  tx.commit();
}

TEST_CASE("a statement prepared by hand on a loan does not reach the next borrower") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  {
    Tx tx = pool->begin();
    tx.exec("PREPARE handmade AS SELECT 1");
    tx.commit();
  }
  Tx tx = pool->begin();
  tx.exec("PREPARE handmade AS SELECT 2");  // would fail with 42P05 if the statement were still there
  CHECK(tx.exec("EXECUTE handmade")[0][0].as<int>() == 2);
  tx.exec("DEALLOCATE handmade");
  tx.commit();
}

TEST_CASE("a Boxcar-only loan is not reset, which is why only Boxcar's own statements may use it") {
  TestDatabase db;
  auto pool = pool_of_one(db);
  {
    Tx tx = pool->begin(LoanUse::BoxcarOnly);
    tx.exec("SET work_mem = '77MB'");  // what Boxcar's own statements never do
    tx.commit();
  }
  CHECK(next_borrower_sees(*pool, "SELECT current_setting('work_mem')").value == "77MB");
}

TEST_CASE("a handler's session changes do not reach the next borrower of the worker's connections") {
  TestDatabase db;
  ensure_role(db, "boxcar_pool_test_role");
  create_app_table(db);
  // The handler switches to the role before the worker completes the receipt as it.
  db.query("GRANT USAGE ON SCHEMA {schema} TO boxcar_pool_test_role");
  db.query("GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO boxcar_pool_test_role");
  db.query("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO boxcar_pool_test_role");
  const std::size_t size = 2;  // the smallest pool a worker of concurrency 1 accepts
  auto pool = ConnectionPool::create({.url = db.url(), .size = size});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  for (int i = 0; i < 4; ++i) inbox.accept(message("orders.v1", "m-" + std::to_string(i)));
  const std::string table = db.qualified("{schema}.app_rows");
  Worker worker(pool,
                {.schema = db.schema(),
                 .consumers = {"orders.v1"},
                 .concurrency = 1,
                 .lease = 5s,
                 .handler_timeout = 2s,
                 .poll_interval = 100ms},
                {{.consumer = "orders.v1",
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    insert_app_row(table, c);
                    c.tx.exec("SET statement_timeout = '1234ms'");
                    c.tx.exec("SELECT set_config('application_name', 'leaked', false)");
                    c.tx.exec("CREATE TEMP TABLE IF NOT EXISTS handler_scratch (id int)");
                    c.tx.exec("SELECT pg_try_advisory_lock(4243)");  // never blocks on the old code
                    c.tx.exec("SET ROLE boxcar_pool_test_role");
                  })}});
  CHECK(worker.drain() == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 4);
  // Every connection the pool holds now, all borrowed at once.
  std::vector<PooledConnection> loans;
  for (std::size_t i = 0; i < pool->open_connections(); ++i) loans.push_back(pool->acquire());
  REQUIRE_FALSE(loans.empty());
  for (auto& loan : loans) {
    pqxx::nontransaction check(*loan);
    const auto row = check.exec(
        "SELECT current_setting('statement_timeout'), current_setting('application_name'), "
        "to_regclass('pg_temp.handler_scratch') IS NULL, current_user = session_user, "
        "(SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid())")[0];
    CHECK(row[0].as<std::string>() != "1234ms");
    CHECK(row[1].as<std::string>() != "leaked");
    CHECK(row[2].as<bool>());
    CHECK(row[3].as<bool>());
    CHECK(row[4].as<int>() == 0);
  }
}
