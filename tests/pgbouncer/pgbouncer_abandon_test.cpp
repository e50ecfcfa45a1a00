// Abandoning a stuck handler behind PgBouncer in transaction pooling: the server session
// that runs the attempt is terminated by the pid the server gave for it, not by the one
// PgBouncer handed the client, so the receipt's row lock goes and lease recovery settles
// the receipt (docs/worker.md, "Handlers that never return").
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/testing/pgbouncer.hpp"
#include "stuck_handler.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kConsumer = "c.v1";

}  // namespace

TEST_CASE(
    "behind PgBouncer in transaction pooling an abandoned handler that keeps querying has its server session "
    "terminated, so lease recovery settles the receipt") {
  REQUIRE(PgBouncer::available());  // scripts/setup installs Debian's pgbouncer
  TestDatabase db;
  PgBouncer bouncer(db.url(), {.pool_mode = "transaction"});
  create_app_table(db);
  const std::string table = db.qualified("{schema}.app_rows");
  // As an operator configures transaction pooling: no server-side prepared statements,
  // LISTEN on a direct session.
  auto pool = ConnectionPool::create(
      {.url = bouncer.route(db.url()), .session_url = db.url(), .size = 4, .prepared_statements = false});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {kConsumer}, .notify = false});
  StuckHandler stuck{.keep_querying = true};
  auto body = handler([&](const nlohmann::json&, HandlerContext& c) { stuck.run(c, table); });
  const std::weak_ptr<InboxHandler> handler_alive = body;
  auto worker = std::make_unique<Worker>(
      pool,
      WorkerOptions{.schema = db.schema(),
                    .consumers = {kConsumer},
                    .concurrency = 2,
                    .lease = 2s,
                    .handler_timeout = 500ms,
                    .max_attempts = 1,
                    .backoff = {.base = 0ms, .cap = 0ms},
                    .poll_interval = 100ms,
                    .shutdown_grace = 1s},
      std::vector<HandlerRegistration>{{.consumer = kConsumer, .supports = {{"thing.happened", 1}}, .handler = body}});
  body.reset();
  inbox.accept(message(kConsumer, "stuck"));
  worker->start();
  REQUIRE(eventually([&] { return stuck.started.load(); }));

  // Each abandonment terminates the attempt's server session; its row lock goes, the lease
  // expires and lease recovery settles it: given back the first time (it ran beside
  // nothing but was no solo run), a crash strike on its solo run as a suspect, on its last
  // attempt. While the session lived on, SKIP LOCKED passed over the row and it stayed
  // PROCESSING.
  const auto status = [&] {
    return db.query("SELECT status FROM {schema}.inbox_receipts WHERE message_id = 'stuck'")[0][0].as<std::string>();
  };
  CHECK(eventually([&] { return status() == "DEAD"; }, 30s));
  CHECK(worker->abandoned_handlers() >= 1);
  CHECK(
      db.query("SELECT dead_reason FROM {schema}.inbox_receipts WHERE message_id = 'stuck'")[0][0].as<std::string>() ==
      "LEASE_EXPIRED_EXHAUSTED");
  // No server backend holds the receipt's row lock any more, although the handler still
  // issues statements.
  CHECK_FALSE(stuck.release.load());
  CHECK(db.scalar("SELECT count(*) FROM (SELECT id FROM {schema}.inbox_receipts WHERE message_id = 'stuck' "
                  "FOR UPDATE NOWAIT) AS free") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows") == 0);

  worker->stop();
  worker.reset();
  stuck.release = true;  // the abandoned threads return, record nothing, and end
  CHECK(eventually([&] { return handler_alive.expired(); }));
}
