// example_sqs_ingress: accepts SQS messages into the Boxcar inbox before deleting them,
// one thread per tenant queue (see README.md).
//
// Configuration (environment): BOXCAR_DATABASE_URL (required), BOXCAR_SCHEMA (boxcar),
// BOXCAR_CONSUMER (orders.projection.v1), BOXCAR_SOURCE (orders-service), SQS_ENDPOINT
// (required), SQS_REGION (AWS_REGION or us-east-1), AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN (unset: unsigned requests), SQS_TENANT_QUEUES
// (required: "tenant=queue-url" entries separated by spaces or commas),
// SQS_DEAD_LETTER_SUFFIX (-dead-letter), SQS_BATCH_SIZE (10), SQS_WAIT_SECONDS (20),
// SQS_VISIBILITY_TIMEOUT (unset: the queue's).
// Exit status: 0 after a clean stop (or `--once` with everything settled), 1 when a batch
// could not be stored or SQS/the database failed, 2 for bad usage.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "sqs_ingress.hpp"

namespace {

using boxcar::examples::sqs::IngressOptions;
using boxcar::examples::sqs::IngressStats;
using boxcar::examples::sqs::SqsIngress;
using boxcar::examples::sqs::SqsOptions;
using boxcar::examples::sqs::TenantQueue;

// The first SIGTERM/SIGINT asks the loops to stop after their current long poll; a
// second one exits at once. A lock-free atomic is safe to set from a signal handler.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void on_signal(int signal) {
  if (g_stop.exchange(true)) _exit(128 + signal);
}

class UsageError : public std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : std::move(fallback);
}

int env_int(const char* name, int fallback, int min, int max) {
  const std::string text = env_or(name, std::to_string(fallback));
  int number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size() || number < min || number > max) {
    throw UsageError(std::string(name) + " must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) +
                     "], got '" + text + "'");
  }
  return number;
}

/// "tenant-7=https://.../orders-tenant-7, tenant-9=https://.../orders-tenant-9"
std::vector<TenantQueue> tenant_queues(const std::string& spec, const std::string& dead_letter_suffix) {
  std::vector<TenantQueue> queues;
  std::string entry;
  const auto flush = [&] {
    if (entry.empty()) return;
    const auto eq = entry.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == entry.size()) {
      throw UsageError("SQS_TENANT_QUEUES: '" + entry + "' is not tenant=queue-url");
    }
    const std::string url = entry.substr(eq + 1);
    queues.push_back(
        {.tenant = entry.substr(0, eq), .queue_url = url, .dead_letter_queue_url = url + dead_letter_suffix});
    entry.clear();
  };
  for (const char c : spec) {
    if (c == ' ' || c == ',' || c == '\n' || c == '\t') {
      flush();
    } else {
      entry += c;
    }
  }
  flush();
  if (queues.empty()) throw UsageError("set SQS_TENANT_QUEUES (tenant=queue-url ...)");
  return queues;
}

int usage(const std::string& problem) {
  std::cerr << problem << "\nusage: example_sqs_ingress [--once]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  bool once = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--once") {
      once = true;
    } else {
      return usage("unknown argument " + std::string(arg));
    }
  }

  SqsOptions sqs;
  IngressOptions options;
  std::vector<TenantQueue> queues;
  std::string url, schema;
  try {
    url = env_or("BOXCAR_DATABASE_URL", "");
    if (url.empty()) throw UsageError("set BOXCAR_DATABASE_URL");
    schema = env_or("BOXCAR_SCHEMA", "boxcar");
    sqs.endpoint = env_or("SQS_ENDPOINT", "");
    if (sqs.endpoint.empty()) throw UsageError("set SQS_ENDPOINT (e.g. https://sqs.eu-west-1.amazonaws.com)");
    sqs.region = env_or("SQS_REGION", env_or("AWS_REGION", sqs.region));
    sqs.access_key_id = env_or("AWS_ACCESS_KEY_ID", "");
    sqs.secret_access_key = env_or("AWS_SECRET_ACCESS_KEY", "");
    sqs.session_token = env_or("AWS_SESSION_TOKEN", "");
    queues = tenant_queues(env_or("SQS_TENANT_QUEUES", ""), env_or("SQS_DEAD_LETTER_SUFFIX", "-dead-letter"));
    options.consumer = env_or("BOXCAR_CONSUMER", options.consumer);
    options.source = env_or("BOXCAR_SOURCE", options.source);
    options.receive.max_messages = env_int("SQS_BATCH_SIZE", 10, 1, 10);
    options.receive.wait_seconds = env_int("SQS_WAIT_SECONDS", 20, 0, 20);
    if (std::getenv("SQS_VISIBILITY_TIMEOUT")) {
      options.receive.visibility_timeout_seconds = env_int("SQS_VISIBILITY_TIMEOUT", 30, 0, 43200);
    }
  } catch (const UsageError& e) {
    return usage(e.what());
  }
  if (const char* level = std::getenv("BOXCAR_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(level));

  std::atomic<bool> failed{false};
  try {
    // No migrate here: the schema is migrated once, before the ingress starts, by the
    // migrator (`boxcar migrate --roles`); this process needs only the boxcar_ingress role.
    auto pool = boxcar::ConnectionPool::create({.url = url});
    boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {options.consumer}});

    std::mutex print;
    std::vector<std::thread> threads;
    for (const TenantQueue& queue : queues) {
      threads.emplace_back([&, queue] {
        try {
          SqsIngress ingress(inbox, sqs, queue, options);
          if (!once) {
            ingress.run(g_stop);
            return;
          }
          const IngressStats stats = ingress.drain();
          if (stats.storage_failures || stats.unsettled) failed = true;
          const std::lock_guard lock(print);
          std::cout << "tenant " << queue.tenant << " received " << stats.received << " accepted " << stats.accepted
                    << " duplicate " << stats.duplicates << " dead-lettered " << stats.dead_lettered
                    << " storage-failures " << stats.storage_failures << " unsettled " << stats.unsettled << "\n";
        } catch (const std::exception& e) {
          // Whatever was not deleted reappears after its visibility timeout.
          failed = true;
          const std::lock_guard lock(print);
          std::cerr << "example_sqs_ingress: tenant " << queue.tenant << ": " << e.what() << "\n";
        }
      });
    }
    for (std::thread& t : threads) t.join();
  } catch (const std::exception& e) {
    std::cerr << "example_sqs_ingress: " << e.what() << "\n";
    return 1;
  }
  return failed ? 1 : 0;
}
