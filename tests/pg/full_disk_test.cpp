// A real full disk under running handlers: the application's table and the outage probe's
// table live on a small tmpfs tablespace that the test fills until PostgreSQL answers
// 53100, so the handlers' writes fail and so does the probe's (docs/worker.md,
// "Infrastructure failures are not attempts"). Nothing may be charged until the bound of
// uncharged hand-backs, and once space is back everything completes on its first attempt.
//
// Mounting a tmpfs needs root: these cases are hidden from test discovery ([.full-disk])
// and run through tests/pg/with_small_tablespace.sh, which mounts one, passes its path in
// BOXCAR_TEST_SMALL_TABLESPACE and reports the ctest as skipped where it cannot mount.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>

#include "boxcar/inbox/worker.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "orders.v1";

// A tablespace on the mounted tmpfs, dropped again at the end. Declared before the
// TestDatabase, so the schema (and every table on it) is gone before the tablespace goes.
class SmallTablespace {
 public:
  SmallTablespace() : name_("boxcar_small_" + std::to_string(::getpid())) {
    const char* dir = std::getenv("BOXCAR_TEST_SMALL_TABLESPACE");
    if (dir == nullptr || *dir == '\0')
      FAIL("BOXCAR_TEST_SMALL_TABLESPACE is not set: run these cases through tests/pg/with_small_tablespace.sh");
    pqxx::connection c(database_url());
    pqxx::nontransaction(c).exec("CREATE TABLESPACE " + name_ + " LOCATION " + c.quote(std::string(dir)));
  }
  ~SmallTablespace() {
    try {
      pqxx::connection c(database_url());
      pqxx::nontransaction(c).exec("DROP TABLESPACE IF EXISTS " + name_);
    } catch (const std::exception& e) {
      WARN("could not drop tablespace " << name_ << ": " << e.what());
    }
  }
  SmallTablespace(const SmallTablespace&) = delete;
  SmallTablespace& operator=(const SmallTablespace&) = delete;
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

struct Setup {
  SmallTablespace tablespace;
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = db.pool(4);
  Inbox inbox{pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false}};
  std::string app_table = db.qualified("{schema}.app_rows");
  std::atomic<int> calls{0};
  // A gate the handler waits at before its write: free_disk_between_handlers() frees the
  // space only while the one handler thread waits there, so no failure is between its
  // statement and its probe then. An outage that ends in that gap is charged: the probe
  // passes, as after a handler's own failure (docs/worker.md).
  std::atomic<bool> gate_closed{false};
  std::atomic<bool> at_gate{false};

  Setup() {
    create_app_table(db);
    // What the handlers write and what the probe writes share the small disk, as
    // docs/worker.md tells an operator to place the probe's table.
    db.execute("ALTER TABLE {schema}.app_rows SET TABLESPACE " + tablespace.name());
    db.execute("ALTER TABLE {schema}.inbox_outage_probe SET TABLESPACE " + tablespace.name());
  }

  // Fills the tablespace until PostgreSQL refuses to extend a file (53100).
  void fill_disk() {
    db.execute("CREATE TABLE {schema}.filler (pad text) TABLESPACE " + tablespace.name());
    db.execute("ALTER TABLE {schema}.filler ALTER pad SET STORAGE plain");  // no TOAST table: pages here
    const auto fill = [&](const std::string& sql) {
      for (int i = 0; i < 10000; ++i) {
        try {
          db.execute(sql);
        } catch (const pqxx::sql_error& e) {
          REQUIRE(e.sqlstate() == "53100");
          return;
        }
      }
      FAIL("the small tablespace never filled up");
    };
    fill("INSERT INTO {schema}.filler SELECT repeat(md5(g::text), 30) FROM generate_series(1, 500) AS g");
    fill("INSERT INTO {schema}.filler VALUES (repeat('x', 900))");
  }
  // Frees the space: a dropped table's file is truncated as its transaction commits.
  void free_disk() { db.execute("DROP TABLE {schema}.filler"); }
  void free_disk_between_handlers() {
    gate_closed = true;
    const bool waiting = eventually([&] { return at_gate.load(); }, 10s);
    free_disk();
    gate_closed = false;
    REQUIRE(waiting);
  }

  Worker worker(std::size_t batch_size, int max_outage_hand_backs) {
    return Worker(pool,
                  {.schema = db.schema(),
                   .consumers = {kConsumer},
                   .concurrency = 1,
                   .batch_size = batch_size,
                   .lease = 5s,
                   .handler_timeout = 3s,
                   .max_attempts = 1,
                   .backoff = {.base = 50ms, .cap = 200ms},
                   .max_outage_hand_backs = max_outage_hand_backs,
                   .poll_interval = 50ms},
                  {{.consumer = kConsumer,
                    .supports = {{"thing.happened", 1}},
                    .handler = handler([this](const nlohmann::json&, HandlerContext& c) {
                      ++calls;
                      if (gate_closed) {
                        at_gate = true;
                        while (gate_closed) std::this_thread::sleep_for(1ms);
                      }
                      insert_app_row(app_table, c);
                    })}});
  }
  std::int64_t count(const std::string& where) const {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE " + where);
  }
};

// Three messages on a full disk: handed back, never charged (max_attempts 1), until space
// is freed; then each completes on its first attempt.
void full_disk_charges_nothing(std::size_t batch_size) {
  Setup s;
  s.fill_disk();
  for (int i = 1; i <= 3; ++i) s.inbox.accept(message(kConsumer, "m-" + std::to_string(i)));
  Worker worker = s.worker(batch_size, 1000);
  worker.start();
  // Every message runs into the full disk more than once.
  const bool handed_back = eventually([&] { return s.count("outage_hand_backs >= 2") == 3; }, 30s);
  CHECK(s.calls >= 6);
  CHECK(s.count("status = 'DEAD'") == 0);
  CHECK(s.count("attempts > 1") == 0);
  s.free_disk_between_handlers();
  const bool completed = eventually([&] { return s.count("status = 'COMPLETED'") == 3; }, 30s);
  worker.stop();
  REQUIRE(handed_back);
  REQUIRE(completed);
  CHECK(s.count("attempts = 1 AND finished_attempts = 1") == 3);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.app_rows") == 3);
  CHECK(worker.stats().retried == 0);
  CHECK(worker.stats().dead == 0);
  CHECK(worker.stats().infrastructure_retries >= 6);
}

}  // namespace

TEST_CASE("a full disk under running handlers charges nothing, and they complete once space is back", "[.full-disk]") {
  full_disk_charges_nothing(1);
}

TEST_CASE("a full disk under a running batch charges none of its messages, judged one by one", "[.full-disk]") {
  full_disk_charges_nothing(3);
}

TEST_CASE("a full disk that outlasts worker.max_outage_hand_backs is charged after that many hand-backs",
          "[.full-disk]") {
  Setup s;
  s.fill_disk();
  s.inbox.accept(message(kConsumer, "m-1"));
  Worker worker = s.worker(1, 2);
  worker.start();
  const bool dead = eventually([&] { return s.count("status = 'DEAD'") == 1; }, 30s);
  worker.stop();
  REQUIRE(dead);
  const auto row =
      s.db.query("SELECT attempts, outage_hand_backs, dead_reason, last_error FROM {schema}.inbox_receipts")[0];
  CHECK(row[0].as<int>() == 1);
  CHECK(row[1].as<int>() == 2);
  CHECK(row[2].as<std::string>() == "ATTEMPTS_EXHAUSTED");
  CHECK_THAT(row[3].as<std::string>(),
             Catch::Contains("charged after 2 uncharged hand-backs") && Catch::Contains("could not extend file"));
  CHECK(s.calls == 3);
  CHECK(worker.stats().infrastructure_retries == 2);
  CHECK(worker.stats().dead == 1);
}
