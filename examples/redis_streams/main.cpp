// example_redis_streams_ingress: a Redis Streams consumer that records every entry in
// the Boxcar inbox before acknowledging it (see README.md in this folder).
//
//   BOXCAR_DATABASE_URL=postgresql://... REDIS_URL=redis://127.0.0.1:6379
//   REDIS_TENANTS=acme,globex example_redis_streams_ingress [--once]
//
// Reads one stream per tenant, orders:<tenant> (REDIS_STREAM_PREFIX), each in its own
// thread with its own connection; the stream key is the tenant (see README.md).
// Without --once it runs until SIGTERM/SIGINT; with --once it processes what is pending
// and new, then exits: 0 when everything read was acknowledged, 1 when a batch could not
// be stored (it stays pending), 2 for configuration errors.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/shutdown_signals.hpp"
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

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    if (end > start) items.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return items;
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
  std::vector<redis_streams::IngressOptions> per_tenant;
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
    options.stream_prefix = env("REDIS_STREAM_PREFIX", "orders");
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
    const std::vector<std::string> tenants = split_list(env("REDIS_TENANTS"));
    if (tenants.empty()) throw std::invalid_argument("REDIS_TENANTS: required (comma-separated tenant ids)");
    for (const std::string& tenant : tenants) {
      per_tenant.push_back(options);
      per_tenant.back().stream = redis_streams::tenant_stream(options.stream_prefix, tenant);
    }
  } catch (const std::exception& e) {
    std::cerr << "configuration: " << e.what() << "\n";
    return 2;
  }

  try {
    // No migrate here: the schema is migrated once, before the ingress starts, by the
    // migrator (`boxcar migrate --roles`); this process needs only the boxcar_ingress role.
    auto pool = boxcar::ConnectionPool::create({.url = url, .size = std::max<std::size_t>(2, per_tenant.size())});
    boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {options.consumer}});
    std::vector<std::unique_ptr<redis_streams::StreamIngress>> ingresses;
    for (const auto& o : per_tenant)
      ingresses.push_back(std::make_unique<redis_streams::StreamIngress>(inbox, redis, o));

    redis_streams::IngressStats stats;
    if (once) {
      for (auto& ingress : ingresses) stats += ingress->run_once();
    } else {
      std::thread([] {
        signals->wait_for_shutdown();
        g_stop = true;
      }).detach();
      std::vector<redis_streams::IngressStats> results(ingresses.size());
      std::vector<std::thread> threads;
      for (std::size_t i = 0; i < ingresses.size(); ++i) {
        std::cerr << "reading " << per_tenant[i].stream << " as " << options.group << "/" << options.consumer_name
                  << " from " << redis.describe() << "\n";
        threads.emplace_back([&, i] { results[i] = ingresses[i]->run(g_stop); });
      }
      for (auto& t : threads) t.join();
      for (const auto& r : results) stats += r;
    }
    std::cout << "read " << stats.read << " accepted " << stats.accepted << " duplicate " << stats.duplicates
              << " dead-lettered " << stats.dead_lettered << " storage-failures " << stats.storage_failures << "\n";
    return stats.storage_failures ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
