// `boxcar publisher` processes SIGKILLed mid-batch several times, then restarted until
// the outbox is drained: every event reaches Kafka at least once, each record carries its
// row's event id, and deduplicating by that id gives exactly the emitted set.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "kill_campaign.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

pid_t spawn_publisher(const TestDatabase& db, const MockKafka& kafka) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string bootstrap = "bootstrap.servers=" + kafka.bootstrap_servers();
    execl(BOXCAR_CLI_PATH, BOXCAR_CLI_PATH, "--database-url", db.url().c_str(), "--schema", db.schema().c_str(),
          "--kafka", bootstrap.c_str(), "--set", "publisher.batch_size=100", "--set",
          "publisher.delivery_timeout_ms=2000", "--set", "publisher.lease_ms=7000", "--http-listen", "", "publisher",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  REQUIRE(pid > 0);
  return pid;
}

// True once the runtime in `pid` has blocked SIGTERM, which it does on its main thread before
// it starts any other (it waits for the signal with sigwait, core/src/shutdown_signals.cpp): a
// SIGTERM sent earlier would kill it with the default action instead of stopping it cleanly.
// Every thread is looked at: while the main thread waits in sigwait, the kernel shows the
// waited signals unblocked in its SigBlk, and the threads started after it show them blocked.
bool blocks_sigterm(pid_t pid) {
  const std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);)
      if (line.rfind("SigBlk:", 0) == 0 && ((std::stoull(line.substr(7), nullptr, 16) >> (SIGTERM - 1)) & 1))
        return true;
  }
  return false;
}

}  // namespace

TEST_CASE("publisher processes killed with SIGKILL mid-batch deliver every event at least once with its id") {
  constexpr int kFirstEvents = 3000;
  constexpr int kMoreEvents = 1000;
  TestDatabase db;
  MockKafka kafka;
  kafka.create_topic("orders", 4);
  auto pool = db.pool(4);
  OutboxEmitter outbox(pool, {.schema = db.schema(), .notify = false});
  std::map<int, std::string> event_id_of;  // payload n -> event id
  const auto emit_events = [&](int count) {
    const int end = static_cast<int>(event_id_of.size()) + count;
    for (int i = static_cast<int>(event_id_of.size()); i < end;) {
      Tx tx = pool->begin();
      for (int j = 0; j < 100; ++j, ++i)
        event_id_of[i] =
            outbox
                .emit(
                    tx,
                    OutboxMessage{
                        .event_type = "order.projected", .schema_version = 1, .topic = "orders", .payload = {{"n", i}}},
                    {.scope = Scope::tenant("t" + std::to_string(i % 7))})
                .event_id;
      tx.commit();
    }
  };
  emit_events(kFirstEvents);
  const auto emitted_count = [&] { return static_cast<std::int64_t>(event_id_of.size()); };
  const auto published = [&] {
    return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'");
  };

  const int kills_mid_run = run_kill_campaign({
      .spawn = [&] { return spawn_publisher(db, kafka); },
      .finished = published,
      .queued = emitted_count,
      .queue_more = [&] { emit_events(kMoreEvents); },
  });
  REQUIRE(kills_mid_run >= 3);

  const pid_t pid = spawn_publisher(db, kafka);
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  while (published() < emitted_count() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(100ms);
  // The killed publishers may have published everything already: then this one must at
  // least have started before it is asked to stop.
  while (!blocks_sigterm(pid) && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(10ms);
  ::kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  REQUIRE(published() == emitted_count());

  const auto records = kafka.read_all("orders", static_cast<std::size_t>(emitted_count()), 60s);
  std::set<std::string> distinct;
  for (const auto& r : records) {
    const int n = nlohmann::json::parse(r.value).at("n").get<int>();
    REQUIRE(r.headers.at("event_id") == event_id_of.at(n));  // the row's own, stable id
    distinct.insert(r.headers.at("event_id"));
  }
  std::set<std::string> emitted;
  for (const auto& [n, id] : event_id_of) emitted.insert(id);
  CHECK(distinct == emitted);
  CHECK(records.size() >= event_id_of.size());
}
