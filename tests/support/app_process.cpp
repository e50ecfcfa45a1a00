// A Boxcar application for process-level tests: `boxcar_test_app ingest N` accepts N
// order.created messages through the runtime's inbox and exits; `boxcar_test_app feed
// PER_SECOND` runs the ingress role (HTTP endpoints, backlog metrics) and accepts about
// PER_SECOND messages a second until SIGTERM/SIGINT, a steady source of traffic whose
// /metrics a scraper sees (tests/prometheus); every other command is
// run_cli with one handler that writes an application row and emits order.projected in
// context.tx. A payload with "stuck": true makes the handler loop forever, ignoring its
// signal (a wedged handler). Configuration comes from BOXCAR_* like any deployment.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include "boxcar/runtime/runtime.hpp"
#include "boxcar/core/shutdown_signals.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "order_events.hpp"

namespace {

using boxcar::testing::OrderProjected;

class OrderProjection final : public boxcar::InboxHandler {
 public:
  OrderProjection(boxcar::OutboxEmitter& outbox, std::string table) : outbox_(outbox), table_(std::move(table)) {}
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    const std::string order_id = payload.at("orderId");
    context.tx.exec("INSERT INTO " + table_ + " (message_id, attempt) VALUES ($1, $2)", context.message_id,
                    context.attempt);
    outbox_.emit(context.tx, OrderProjected{order_id}, {.scope = context.scope, .causation_id = context.message_id});
    while (payload.value("stuck", false)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

 private:
  boxcar::OutboxEmitter& outbox_;
  std::string table_;
};

boxcar::AcceptRequest order_created(int i, const std::string& id_prefix) {
  return {.scope = boxcar::Scope::tenant("t" + std::to_string(i % 3)),
          .source = "test-ingress",
          .consumer = "orders.v1",
          .message_id = id_prefix + std::to_string(i),
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", "o-" + std::to_string(i)}}};
}

int feed(int per_second) {
  boxcar::ShutdownSignals signals;  // before any thread starts, so only sigwait sees SIGTERM/SIGINT
  std::atomic<bool> stop{false};
  std::thread waiter([&] {
    signals.wait_for_shutdown();
    stop = true;
  });
  boxcar::Runtime runtime(boxcar::load_config());
  runtime.start(boxcar::Role::Ingress);
  const auto pause = std::chrono::microseconds(1'000'000 / per_second);
  for (int i = 0; !stop; ++i) {
    runtime.inbox().accept(order_created(i, "feed-"));
    std::this_thread::sleep_for(pause);
  }
  waiter.join();
  runtime.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "feed") return feed(std::max(1, std::stoi(argv[2])));
  if (argc == 3 && std::string(argv[1]) == "ingest") {
    boxcar::Runtime runtime(boxcar::load_config());
    const int count = std::stoi(argv[2]);
    for (int i = 0; i < count; ++i) runtime.inbox().accept(order_created(i, "m-"));
    std::cout << "accepted " << count << "\n";
    return 0;
  }
  return boxcar::run_cli(argc, argv, [](boxcar::Runtime& runtime) {
    const std::string table = boxcar::quote_identifier(runtime.config().schema) + ".app_rows";
    return std::vector<boxcar::HandlerRegistration>{
        {.consumer = "orders.v1",
         .supports = {{"order.created", 1}},
         .handler = std::make_shared<OrderProjection>(runtime.outbox(), table)}};
  });
}
