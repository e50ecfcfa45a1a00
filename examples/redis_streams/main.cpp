// example_redis_streams_ingress: a Redis Streams consumer that records every entry in
// the Boxcar inbox before acknowledging it (see README.md in this folder).
//
//   BOXCAR_DATABASE_URL=postgresql://... REDIS_URL=redis://127.0.0.1:6379
//   example_redis_streams_ingress [--once]
//
// Without --once it runs until SIGTERM/SIGINT; with --once it processes what is pending
// and new, then exits: 0 when everything read was acknowledged, 1 when a batch could not
// be stored (it stays pending), 2 for configuration errors.
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/runtime/migrate.hpp"
#include "boxcar/runtime/shutdown_signals.hpp"
#include "stream_ingress.hpp"

namespace {

// Static storage: the detached signal thread may still hold it while the process exits.
std::atomic<bool> g_stop{false};

std::string env(const char* name, const std::string& fallback = {}) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

long env_number(const char* name, long fallback) {
  const std::string text = env(name);
  if (text.empty()) return fallback;
  long value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || value < 0)
    throw std::invalid_argument(std::string(name) + ": expected a non-negative integer");
  return value;
}

std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "ingress-1";
  return name;
}

}  // namespace

int main(int argc, char** argv) {
  bool once = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--once") {
      once = true;
    } else {
      std::cerr << "usage: " << argv[0] << " [--once]\n";
      return 2;
    }
  }
  // Without --once: block SIGTERM/SIGINT before any thread starts; one thread waits for
  // them and asks the loop to stop after its current batch. With --once the default
  // action applies: dying mid-batch is safe, the unacknowledged entries stay pending.
  static std::optional<boxcar::ShutdownSignals> signals;
  if (!once) signals.emplace();

  redis_streams::RedisOptions redis;
  redis_streams::IngressOptions options;
  std::string url, schema;
  try {
    url = env("BOXCAR_DATABASE_URL");
    if (url.empty()) throw std::invalid_argument("BOXCAR_DATABASE_URL: required");
    schema = env("BOXCAR_SCHEMA", "boxcar");
    if (const std::string redis_url = env("REDIS_URL"); !redis_url.empty()) {
      redis = redis_streams::RedisOptions::from_url(redis_url);
    } else {
      redis.host = env("REDIS_HOST", "127.0.0.1");
      redis.port = static_cast<int>(env_number("REDIS_PORT", 6379));
    }
    options.stream = env("REDIS_STREAM", "orders");
    options.group = env("REDIS_GROUP", "boxcar-ingress");
    options.consumer_name = env("REDIS_CONSUMER_NAME", host_name());
    options.dead_letter_stream = env("REDIS_DEAD_LETTER_STREAM");
    options.source = env("BOXCAR_SOURCE", "orders-service");
    options.consumer = env("BOXCAR_CONSUMER", "orders.projection.v1");
    options.batch_size = static_cast<std::size_t>(env_number("REDIS_BATCH_SIZE", 100));
    options.block = std::chrono::milliseconds(env_number("REDIS_BLOCK_MS", 2000));
    options.claim_min_idle = std::chrono::milliseconds(env_number("REDIS_CLAIM_MIN_IDLE_MS", 60000));
    options.claim_interval = std::chrono::milliseconds(env_number("REDIS_CLAIM_INTERVAL_MS", 30000));
    if (options.batch_size == 0) throw std::invalid_argument("REDIS_BATCH_SIZE: must be at least 1");
  } catch (const std::exception& e) {
    std::cerr << "configuration: " << e.what() << "\n";
    return 2;
  }

  try {
    boxcar::migrate(url, {.schema = schema});  // idempotent; also `boxcar migrate`
    auto pool = boxcar::ConnectionPool::create({.url = url, .size = 2});
    boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {options.consumer}});
    redis_streams::StreamIngress ingress(inbox, redis, options);

    redis_streams::IngressStats stats;
    if (once) {
      stats = ingress.run_once();
    } else {
      std::thread([] {
        signals->wait_for_shutdown();
        g_stop = true;
      }).detach();
      std::cerr << "reading " << options.stream << " as " << options.group << "/" << options.consumer_name
                << " from " << redis.describe() << "\n";
      stats = ingress.run(g_stop);
    }
    std::cout << "read " << stats.read << " accepted " << stats.accepted << " duplicate " << stats.duplicates
              << " dead-lettered " << stats.dead_lettered << " storage-failures " << stats.storage_failures
              << "\n";
    return stats.storage_failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
