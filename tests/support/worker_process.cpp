// A worker process for fault tests: one consumer, a handler that inserts one app row,
// graceful stop on SIGTERM. Killed with SIGKILL by the tests at random moments. A message
// whose payload has "poison": true makes the handler call abort(): the whole process dies.
//
//   boxcar_test_worker URL SCHEMA BATCH_SIZE [MAX_ATTEMPTS]
#include <sys/resource.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/core/shutdown_signals.hpp"
#include "boxcar/core/sql_identifier.hpp"

namespace {

class AppRowWriter final : public boxcar::InboxHandler {
 public:
  explicit AppRowWriter(std::string table) : table_(std::move(table)) {}
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    if (payload.value("poison", false)) std::abort();
    context.tx.exec("INSERT INTO " + table_ + " (message_id, attempt) VALUES ($1, $2)", context.message_id,
                    context.attempt);
  }

 private:
  std::string table_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: boxcar_test_worker URL SCHEMA BATCH_SIZE [MAX_ATTEMPTS]\n";
    return 2;
  }
  // A poison message aborts this process on purpose: no core file for each crash.
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  boxcar::ShutdownSignals signals;
  const std::string url = argv[1];
  const std::string schema = argv[2];
  using namespace std::chrono_literals;
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 6});
  boxcar::Worker worker(pool,
                        {.schema = schema,
                         .consumers = {"crash.v1"},
                         .concurrency = 4,
                         .batch_size = static_cast<std::size_t>(std::stoi(argv[3])),
                         .lease = 2500ms,
                         .handler_timeout = 1000ms,
                         .max_attempts = argc == 5 ? std::stoi(argv[4]) : 50,
                         .backoff = {.base = 10ms, .cap = 100ms},
                         .poll_interval = 200ms},
                        {{.consumer = "crash.v1",
                          .supports = {{"crash.test", 1}},
                          .handler = std::make_shared<AppRowWriter>(boxcar::quote_identifier(schema) + ".app_rows")}});
  worker.start();
  signals.wait_for_shutdown();
  worker.stop();
  return 0;
}
