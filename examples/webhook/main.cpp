// example_webhook: a Standard Webhooks endpoint that records orders events in the inbox
// before it acknowledges them. See README.md in this folder.
//
//   BOXCAR_DATABASE_URL=postgresql://migrator@... [BOXCAR_SCHEMA=boxcar] example_webhook migrate
//   BOXCAR_DATABASE_URL=postgresql://ingress@...  [BOXCAR_SCHEMA=boxcar] example_webhook
//
// The endpoint never migrates: `migrate` runs once, before it, as the user that may do DDL
// (like `boxcar migrate --roles`, docs/operations.md "Roles"); the endpoint itself needs
// only the ingress role. Serving:
//   BOXCAR_DATABASE_URL=postgresql://...   (required)
//   BOXCAR_SCHEMA=boxcar                   an already migrated schema
//   WEBHOOK_LISTEN=127.0.0.1:8080          civetweb listening_ports
//   WEBHOOK_SECRETS=tenant-a=whsec_...,tenant-a=whsec_...,tenant-b=whsec_...   (required)
//   WEBHOOK_CONSUMER=orders.projection.v1
//   Abuse limits (README.md, "Limits"): WEBHOOK_THREADS=256, WEBHOOK_HEADER_TIMEOUT_MS=5000,
//   WEBHOOK_BODY_TIMEOUT_MS=10000, WEBHOOK_MAX_CONNECTIONS_PER_CLIENT=8 (0: off, behind a proxy)
//
// Runs until SIGTERM or SIGINT, then finishes in-flight requests and exits 0.
#include <signal.h>

#include <charconv>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <spdlog/spdlog.h>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/migrate.hpp"
#include "signature.hpp"
#include "webhook_server.hpp"

namespace {

std::string env(const char* name, const std::string& fallback = {}) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : fallback;
}

/// A non-negative integer variable, or `fallback` when unset. @throws std::invalid_argument
/// naming the variable; the Server checks the ranges.
int env_int(const char* name, int fallback) {
  const std::string text = env(name);
  if (text.empty()) return fallback;
  int value = 0;
  const auto parsed = std::from_chars(text.data(), text.data() + text.size(), value);
  if (parsed.ec != std::errc{} || parsed.ptr != text.data() + text.size() || value < 0)
    throw std::invalid_argument(std::string(name) + " must be a non-negative integer, got '" + text + "'");
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (argc > 2 || (!command.empty() && command != "migrate")) {
    std::cerr << "usage: example_webhook [migrate]\n";
    return 2;
  }
  const std::string url = env("BOXCAR_DATABASE_URL");
  const std::string schema = env("BOXCAR_SCHEMA", "boxcar");
  const std::string listen = env("WEBHOOK_LISTEN", "127.0.0.1:8080");
  const std::string consumer = env("WEBHOOK_CONSUMER", "orders.projection.v1");
  if (url.empty()) {
    std::cerr << "set BOXCAR_DATABASE_URL\n";
    return 2;
  }
  if (command == "migrate") {
    try {
      boxcar::migrate(url, {.schema = schema});  // idempotent; also `boxcar migrate`
      return 0;
    } catch (const std::exception& e) {
      spdlog::error("migrate failed: {}", e.what());
      return 1;
    }
  }
  std::vector<webhook::SigningKey> keys;
  try {
    keys = webhook::parse_secrets(env("WEBHOOK_SECRETS"));
  } catch (const std::invalid_argument& e) {
    // Never echo the variable: it holds secrets.
    std::cerr << "WEBHOOK_SECRETS: " << e.what() << "\n";
    return 2;
  }

  // Block the stop signals before civetweb starts its threads (they inherit the mask), so
  // only sigwait() below sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  try {
    auto pool = boxcar::ConnectionPool::create({.url = url});
    boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {consumer}});
    webhook::ServerOptions options{.listen = listen, .keys = std::move(keys), .consumer = consumer};
    options.threads = env_int("WEBHOOK_THREADS", options.threads);
    options.header_timeout = std::chrono::milliseconds(
        env_int("WEBHOOK_HEADER_TIMEOUT_MS", static_cast<int>(options.header_timeout.count())));
    options.body_timeout =
        std::chrono::milliseconds(env_int("WEBHOOK_BODY_TIMEOUT_MS", static_cast<int>(options.body_timeout.count())));
    options.max_connections_per_client =
        env_int("WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", options.max_connections_per_client);
    webhook::Server server(inbox, std::move(options));
    spdlog::info("example_webhook: POST http://{}{}/<tenant> (port {}), consumer {}", listen, webhook::kPath,
                 server.port(), consumer);

    int signal = 0;
    sigwait(&stop_signals, &signal);
    spdlog::info("example_webhook: signal {}, stopping", signal);
  } catch (const std::exception& e) {
    std::cerr << "example_webhook: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
