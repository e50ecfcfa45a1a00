// bench_rss_probe: runs one Boxcar component alone in this process, to measure its peak
// resident memory (VmHWM) without the benchmark's own state. bench_worker and
// bench_publisher spawn it at the end of their run (their `--case rss`), after loading
// its work into a schema of its own; it prints `probe_peak_rss_kib N` last.
//
//   bench_rss_probe worker --database-url URL --schema S --consumer C --messages N
//       a Worker (16 handler threads, batch 32, claim 32) with a handler that does
//       nothing, draining the N PENDING messages of consumer C;
//   bench_rss_probe publisher --database-url URL --schema S --bootstrap HOST:PORT --events N
//       a Publisher (batch 1000, 4 batches in flight) draining N due outbox events to the
//       Kafka cluster at HOST:PORT (the parent's librdkafka mock cluster, over loopback).
#include <chrono>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "peak_rss.hpp"

namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kLimit = 300s;

class DoNothing final : public boxcar::InboxHandler {
 public:
  void handle(const nlohmann::json&, boxcar::HandlerContext&) override {}
};

void run_worker(const std::map<std::string, std::string>& a) {
  const auto messages = std::stoull(a.at("--messages"));
  auto pool = boxcar::ConnectionPool::create({.url = a.at("--database-url"), .size = 18});
  boxcar::Worker worker(
      pool,
      {.schema = a.at("--schema"),
       .consumers = {a.at("--consumer")},
       .concurrency = 16,
       .batch_size = 32,
       .claim_limit = 32,
       .lease = 60s,
       .handler_timeout = 30s,
       .poll_interval = 50ms},
      {{.consumer = a.at("--consumer"), .supports = {{"order.created", 1}}, .handler = std::make_shared<DoNothing>()}});
  worker.start();
  const auto until = Clock::now() + kLimit;
  while (worker.stats().completed < messages && Clock::now() < until) std::this_thread::sleep_for(5ms);
  worker.stop();
  if (worker.stats().completed < messages)
    throw std::runtime_error("worker completed " + std::to_string(worker.stats().completed) + " of " +
                             std::to_string(messages));
}

void run_publisher(const std::map<std::string, std::string>& a) {
  const auto events = std::stoull(a.at("--events"));
  auto pool = boxcar::ConnectionPool::create({.url = a.at("--database-url"), .size = 4});
  boxcar::Publisher publisher(pool, {.schema = a.at("--schema"),
                                     .kafka = {{"bootstrap.servers", a.at("--bootstrap")}},
                                     .batch_size = 1000,
                                     .max_in_flight_batches = 4,
                                     .delivery_timeout = 30s});
  publisher.start();
  const auto until = Clock::now() + kLimit;
  while (publisher.stats().delivered < events && Clock::now() < until) std::this_thread::sleep_for(5ms);
  publisher.stop();
  if (publisher.stats().delivered < events)
    throw std::runtime_error("publisher delivered " + std::to_string(publisher.stats().delivered) + " of " +
                             std::to_string(events));
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc < 2) throw std::invalid_argument("usage: bench_rss_probe worker|publisher --key value...");
    const std::string role = argv[1];
    std::map<std::string, std::string> args;
    for (int i = 2; i + 1 < argc; i += 2) args[argv[i]] = argv[i + 1];
    if (role == "worker")
      run_worker(args);
    else if (role == "publisher")
      run_publisher(args);
    else
      throw std::invalid_argument("unknown role " + role);
    boxcar::bench::print_peak_rss_line();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "bench_rss_probe failed: " << e.what() << "\n";
    return 1;
  }
}
