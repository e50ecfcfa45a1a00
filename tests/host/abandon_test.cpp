// A worker process whose handler ignores cancellation still stops on SIGTERM, and exits
// non-zero because a thread was abandoned.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

// The exit status of `pid`, or -1 if it has not exited within `limit` (it is then killed).
int exit_status_within(pid_t pid, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(50ms);
  }
  ::kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

}  // namespace

TEST_CASE("a worker process with an abandoned handler stops within its grace and exits non-zero") {
  TestDatabase db;
  create_app_table(db);
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  const auto order = [](const std::string& id, bool stuck) {
    return AcceptRequest{.scope = Scope::tenant("t1"),
                         .source = "test",
                         .consumer = "orders.v1",
                         .message_id = id,
                         .event_type = "order.created",
                         .schema_version = 1,
                         .payload = {{"orderId", id}, {"stuck", stuck}}};
  };
  inbox.accept(order("stuck", true));
  for (int i = 0; i < 5; ++i) inbox.accept(order("m-" + std::to_string(i), false));

  const std::vector<std::string> environment = {"BOXCAR_DATABASE_URL=" + db.url(),
                                                "BOXCAR_SCHEMA=" + db.schema(),
                                                "BOXCAR_CONSUMERS=orders.v1",
                                                "BOXCAR_HTTP_LISTEN=127.0.0.1:0",
                                                "BOXCAR_WORKER_POLL_INTERVAL_MS=100",
                                                "BOXCAR_WORKER_CONCURRENCY=2",
                                                "BOXCAR_WORKER_HANDLER_TIMEOUT_MS=500",
                                                "BOXCAR_WORKER_LEASE_MS=2000",
                                                "BOXCAR_WORKER_MAX_ATTEMPTS=1",
                                                "BOXCAR_SHUTDOWN_GRACE_MS=500",
                                                "BOXCAR_LOG_LEVEL=warn"};
  const pid_t worker = fork();
  if (worker == 0) {
    for (const auto& e : environment) putenv(const_cast<char*>(e.c_str()));
    execl(BOXCAR_TEST_APP_PATH, BOXCAR_TEST_APP_PATH, "worker", static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto status = [&](const std::string& id) {
    return db.query("SELECT status FROM {schema}.inbox_receipts WHERE message_id = '" + id + "'")[0][0]
        .as<std::string>();
  };
  CHECK(eventually([&] {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'COMPLETED'") == 5 &&
           status("stuck") == "DEAD";
  }));
  ::kill(worker, SIGTERM);
  CHECK(exit_status_within(worker, 15s) == 1);  // liveness bound; the grace is 0.5 s
  CHECK(db.scalar("SELECT count(*) FROM {schema}.app_rows WHERE message_id = 'stuck'") == 0);
}
