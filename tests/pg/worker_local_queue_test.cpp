// Claims the worker holds in its local queue, and its lifecycle: what is handed back at
// stop(), what a restart starts from, and recovered claims when the next claim fails.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include "boxcar/inbox/worker.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "c.v1";

WorkerOptions options_for(const TestDatabase& db) {
  return {.schema = db.schema(),
          .consumers = {kConsumer},
          .concurrency = 1,
          .lease = 3s,
          .handler_timeout = 1s,
          .max_attempts = 5,
          .backoff = {.base = 0ms, .cap = 0ms},
          .poll_interval = 100ms,
          .shutdown_grace = 5s};
}

// What a worker that died holding the claim leaves behind: PROCESSING under a token
// nobody has, its lease expired `ago`.
void expire_claim(TestDatabase& db, const std::string& message_id, int attempts, const std::string& ago) {
  db.query("UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', attempts = " + std::to_string(attempts) +
           ", claim_token = gen_random_uuid(), lease_expires_at = now() - interval '" + ago + "' WHERE message_id = '" +
           message_id + "'");
}

}  // namespace

TEST_CASE("a worker started again after stop runs its handlers with a live cancellation signal") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  const std::string table = db.qualified("{schema}.app_rows");
  std::atomic<int> cancelled_on_entry{0};
  std::atomic<int> calls{0};
  Worker worker(pool, options_for(db),
                {{.consumer = kConsumer,
                  .supports = {{"thing.happened", 1}},
                  .handler = handler([&](const nlohmann::json&, HandlerContext& c) {
                    if (c.signal.cancelled()) {
                      ++cancelled_on_entry;
                      throw std::runtime_error("cancelled before it started");  // as a cooperative handler does
                    }
                    insert_app_row(table, c);
                    ++calls;
                  })}});
  worker.start();
  inbox.accept(message(kConsumer, "before-stop"));
  REQUIRE(eventually([&] { return calls.load() == 1; }));
  worker.stop();

  worker.start();
  inbox.accept(message(kConsumer, "after-restart"));
  // Until it completes, or (before, every attempt cancelled on entry) ends DEAD.
  CHECK(eventually([&] {
    return db.scalar(
               "SELECT count(*) FROM {schema}.inbox_receipts WHERE status IN ('COMPLETED', 'DEAD') AND "
               "message_id = 'after-restart'") == 1;
  }));
  worker.stop();

  CHECK(cancelled_on_entry == 0);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'after-restart' AND "
                  "status = 'COMPLETED' AND attempts = 1") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 2);
}

TEST_CASE("an expired claim is released unspent while every claim fails, and completes once claims work again") {
  TestDatabase db;
  create_app_table(db);
  auto pool = db.pool(6);
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  inbox.accept(message(kConsumer, "recovered"));
  inbox.accept(message(kConsumer, "unclaimable"));
  expire_claim(db, "recovered", 1, "1 second");
  // Every claim of a due receipt fails in the database, as when the server refuses them
  // between the recovery statement and the claim statement; recovery itself still works.
  db.query(
      "CREATE FUNCTION {schema}.refuse_claims() RETURNS trigger LANGUAGE plpgsql AS "
      "$$ BEGIN RAISE EXCEPTION 'claims are refused'; END $$");
  db.query(
      "CREATE TRIGGER refuse_claims BEFORE UPDATE ON {schema}.inbox_receipts FOR EACH ROW "
      "WHEN (OLD.status IN ('PENDING', 'RETRYABLE') AND NEW.status = 'PROCESSING') "
      "EXECUTE FUNCTION {schema}.refuse_claims()");

  const std::string table = db.qualified("{schema}.app_rows");
  Worker worker(pool, options_for(db), {app_row_writer(kConsumer, table)});
  worker.start();
  // The claim that died was never a started solo run: released as a suspect, its attempt
  // given back, nothing queued that the failing claims could drop.
  CHECK(eventually(
      [&] {
        return db.scalar(
                   "SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'recovered' AND suspect AND "
                   "status IN ('PENDING', 'RETRYABLE') AND attempts = 0 AND claim_token IS NULL") == 1;
      },
      20s));
  db.query("DROP TRIGGER refuse_claims ON {schema}.inbox_receipts");
  CHECK(eventually(
      [&] { return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 2; }, 20s));
  worker.stop();

  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'recovered' AND "
                  "status = 'COMPLETED' AND attempts = 1") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 2);
}
