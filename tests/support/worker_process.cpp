// A worker process for fault tests: one consumer, a handler that inserts one app row,
// graceful stop on SIGTERM. Killed with SIGKILL by the tests at random moments. A message
// whose payload has "poison": true makes the handler call abort(): the whole process dies.
// With BOXCAR_TEST_BATCH_HANDLER=1 in its environment the consumer has a batch handler
// instead: one unnest insert of the batch's app rows, then 20 ms of work inside
// handle_batch(), so a kill usually lands there; a poison message in the batch aborts it.
//
//   boxcar_test_worker URL SCHEMA BATCH_SIZE [MAX_ATTEMPTS]
#include <sys/resource.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <thread>

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

class AppRowsWriter final : public boxcar::InboxBatchHandler {
 public:
  explicit AppRowsWriter(std::string table) : table_(std::move(table)) {}
  boxcar::BatchOutcomes handle_batch(std::span<const boxcar::InboxMessage> messages,
                                     boxcar::BatchContext& context) override {
    std::string ids = "{", attempts = "{";
    for (const auto& m : messages) {
      if (m.payload.value("poison", false)) std::abort();
      if (ids.size() > 1) ids += ',', attempts += ',';
      ids += '"' + m.message_id + '"';  // m-<n>: nothing to escape
      attempts += std::to_string(m.attempt);
    }
    context.tx.exec(
        "INSERT INTO " + table_ +
            " (message_id, attempt) SELECT * FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::int[]))",
        ids + "}", attempts + "}");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return boxcar::BatchOutcomes(messages.size(), boxcar::MessageOutcome::completed());
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
  const std::string table = boxcar::quote_identifier(schema) + ".app_rows";
  const char* batch_env = std::getenv("BOXCAR_TEST_BATCH_HANDLER");
  const bool batch_handler = batch_env && std::string(batch_env) == "1";
  auto pool = boxcar::ConnectionPool::create({.url = url, .size = 6});
  boxcar::Worker worker(
      pool,
      {.schema = schema,
       .consumers = {"crash.v1"},
       .concurrency = 4,
       .batch_size = static_cast<std::size_t>(std::stoi(argv[3])),
       .lease = 2500ms,
       .handler_timeout = 1000ms,
       .max_attempts = argc == 5 ? std::stoi(argv[4]) : 50,
       .backoff = {.base = 10ms, .cap = 100ms},
       .poll_interval = 200ms},
      {batch_handler ? boxcar::HandlerRegistration{.consumer = "crash.v1",
                                                   .supports = {{"crash.test", 1}},
                                                   .batch_handler = std::make_shared<AppRowsWriter>(table)}
                     : boxcar::HandlerRegistration{.consumer = "crash.v1",
                                                   .supports = {{"crash.test", 1}},
                                                   .handler = std::make_shared<AppRowWriter>(table)}});
  worker.start();
  signals.wait_for_shutdown();
  worker.stop();
  return 0;
}
