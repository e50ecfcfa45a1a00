// Handler threads' own claims (docs/worker.md, "Claims"): with batch_size > 1, a handler
// thread that finds the local queue empty while a consumer has a backlog claims its next
// batch itself, so claims run in parallel instead of one at a time on the dispatcher. It
// never does so for a trickle (one message per wake-up) or in one-message mode, where it
// would only add statements. Within the process the claims of one consumer, the handler
// threads' and the dispatcher's, still run one at a time (OwnedConsumer::lane, inbox/src/owned_consumer.hpp).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "boxcar/inbox/worker.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool;
  std::string app_table;
  Setup() : pool(db.pool(10)), app_table(db.qualified("{schema}.app_rows")) { create_app_table(db); }

  void accept(int first, int count) const {
    Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}});
    std::vector<AcceptRequest> batch;
    for (int i = first; i < first + count; ++i) batch.push_back(message("c.v1", "m-" + std::to_string(i)));
    inbox.accept_many(batch);
  }
  WorkerOptions options(std::size_t batch_size) const {
    return {.schema = db.schema(),
            .consumers = {"c.v1"},
            .concurrency = 4,
            .batch_size = batch_size,
            .claim_limit = batch_size,
            .lease = 5s,
            .handler_timeout = 2s,
            .poll_interval = 200ms};
  }
  HandlerRegistration writer() const { return app_row_writer("c.v1", app_table); }
  long long completed() const {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'");
  }
};

}  // namespace

TEST_CASE("with a backlog, idle handler threads claim their own batches and every message completes once") {
  Setup s;
  s.accept(0, 400);
  Worker worker(s.pool, s.options(8), {s.writer()});
  worker.start();
  REQUIRE(eventually([&] { return s.completed() == 400; }, 30s));
  worker.stop();

  const auto stats = worker.stats();
  // The first full claim leaves three of the four threads idle beside an empty queue:
  // they claim for themselves at once rather than wait for the dispatcher's next claim.
  CHECK(stats.handler_thread_claims > 0);
  CHECK(stats.handler_thread_claims < stats.claim_statements);
  CHECK(stats.claimed == 400);
  CHECK(stats.completed == 400);
  CHECK(s.db.scalar("SELECT count(*) FROM " + s.app_table) == 400);
  CHECK(s.db.scalar("SELECT count(DISTINCT message_id) FROM " + s.app_table) == 400);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE attempts <> 1") == 0);
}

TEST_CASE("a trickle of one message per wake-up makes no handler thread claim: only the dispatcher does") {
  Setup s;
  Worker worker(s.pool, s.options(8), {s.writer()});
  worker.start();
  for (int i = 0; i < 10; ++i) {
    s.accept(i, 1);
    REQUIRE(eventually([&] { return s.completed() == i + 1; }, 10s));
  }
  worker.stop();
  // Each claim came back short (1 of 8): no backlog, so no handler thread claimed.
  CHECK(worker.stats().claim_statements >= 10);
  CHECK(worker.stats().handler_thread_claims == 0);
}

TEST_CASE("in one-message mode handler threads never claim, even with a backlog") {
  Setup s;
  s.accept(0, 200);
  Worker worker(s.pool, s.options(1), {s.writer()});
  worker.start();
  REQUIRE(eventually([&] { return s.completed() == 200; }, 30s));
  worker.stop();
  CHECK(worker.stats().handler_thread_claims == 0);
  CHECK(worker.stats().completed == 200);
}

TEST_CASE(
    "a process runs one claim of a consumer at a time: its handler threads' claims and the dispatcher's never overlap") {
  Setup s;
  // inbox_claim_fair() wrapped so that every call records when it ran and takes 20 ms:
  // claims made at the same time would overlap in the record.
  s.db.execute(
      "ALTER FUNCTION {schema}.inbox_claim_fair(text, bigint, double precision, text, text) "
      "RENAME TO inbox_claim_fair_unwrapped");
  s.db.execute("CREATE TABLE {schema}.claim_calls (started timestamptz NOT NULL, ended timestamptz NOT NULL)");
  s.db.execute(R"(
CREATE FUNCTION {schema}.inbox_claim_fair(a text, b bigint, c double precision, d text, e text)
RETURNS TABLE (id bigint, claim_token text, attempts integer, scope_kind text, scope_id text, source text,
               consumer text, message_id text, event_type text, schema_version integer, payload text,
               metadata text, status text, suspect boolean, ordered boolean, cursor_kind text, cursor_id text)
LANGUAGE plpgsql AS $$
DECLARE
  started timestamptz := pg_catalog.clock_timestamp();
BEGIN
  PERFORM pg_catalog.pg_sleep(0.02);
  RETURN QUERY SELECT * FROM {schema}.inbox_claim_fair_unwrapped(a, b, c, d, e);
  INSERT INTO {schema}.claim_calls VALUES (started, pg_catalog.clock_timestamp());
END $$)");
  s.accept(0, 240);
  WorkerOptions options = s.options(4);
  options.concurrency = 8;
  Worker worker(s.pool, options, {s.writer()});
  worker.start();
  REQUIRE(eventually([&] { return s.completed() == 240; }, 60s));
  worker.stop();

  const auto stats = worker.stats();
  CHECK(stats.handler_thread_claims > 0);  // eight threads that would have claimed at once
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.claim_calls") == static_cast<long long>(stats.claim_statements));
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.claim_calls AS a JOIN {schema}.claim_calls AS b "
                    "ON a.ctid < b.ctid AND a.started < b.ended AND b.started < a.ended") == 0);
  CHECK(s.db.scalar("SELECT count(DISTINCT message_id) FROM " + s.app_table) == 240);
  CHECK(s.db.scalar("SELECT count(*) FROM " + s.app_table) == 240);
}
