// example_webhook: a Standard Webhooks endpoint that records orders events in the inbox
// before it acknowledges them. See README.md in this folder.
//
//   BOXCAR_DATABASE_URL=postgresql://...   (required)
//   BOXCAR_SCHEMA=boxcar                   schema migrated at startup
//   WEBHOOK_LISTEN=127.0.0.1:8080          civetweb listening_ports
//   WEBHOOK_SECRETS=tenant-a=whsec_...,tenant-a=whsec_...,tenant-b=whsec_...   (required)
//   WEBHOOK_CONSUMER=orders.projection.v1
//
// Runs until SIGTERM or SIGINT, then finishes in-flight requests and exits 0.
#include <signal.h>

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

}  // namespace

int main() {
  const std::string url = env("BOXCAR_DATABASE_URL");
  const std::string schema = env("BOXCAR_SCHEMA", "boxcar");
  const std::string listen = env("WEBHOOK_LISTEN", "127.0.0.1:8080");
  const std::string consumer = env("WEBHOOK_CONSUMER", "orders.projection.v1");
  if (url.empty()) {
    std::cerr << "set BOXCAR_DATABASE_URL\n";
    return 2;
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
    boxcar::migrate(url, {.schema = schema});  // idempotent; also `boxcar migrate`
    auto pool = boxcar::ConnectionPool::create({.url = url});
    boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {consumer}});
    webhook::Server server(inbox, {.listen = listen, .keys = std::move(keys), .consumer = consumer});
    spdlog::info("example_webhook: POST http://{}{} (port {}), consumer {}", listen, webhook::kPath, server.port(),
                 consumer);

    int signal = 0;
    sigwait(&stop_signals, &signal);
    spdlog::info("example_webhook: signal {}, stopping", signal);
  } catch (const std::exception& e) {
    std::cerr << "example_webhook: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
