// example_rabbitmq_ingress: a RabbitMQ consumer that records every delivery in the Boxcar
// inbox before it acknowledges it (see README.md in this folder for the acknowledgement
// table).
//
//   BOXCAR_DATABASE_URL=postgresql://... RABBITMQ_HOST=localhost example_rabbitmq_ingress
//   example_rabbitmq_ingress --until-idle 5    # exit after 5 s without a delivery (tests)
//
// Environment: BOXCAR_DATABASE_URL (required), BOXCAR_SCHEMA (boxcar), BOXCAR_CONSUMER
// (orders.projection.v1), BOXCAR_SOURCE (orders-service), RABBITMQ_HOST (localhost),
// RABBITMQ_PORT (5672), RABBITMQ_USER / RABBITMQ_PASSWORD (guest), RABBITMQ_VHOST (/),
// RABBITMQ_QUEUE (orders), RABBITMQ_PREFETCH (16). Runs until SIGTERM or SIGINT.
// Exit status: 0 after a clean stop, 1 when the broker or database fails, 2 for bad usage.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "ingress.hpp"

namespace {

// The first SIGTERM/SIGINT asks the consume loop to stop (it polls every 200 ms); a
// second one exits at once. A lock-free atomic is safe to set from a signal handler.
std::atomic<bool> g_stop{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void on_signal(int signal) {
  if (g_stop.exchange(true)) _exit(128 + signal);
}

int usage(const std::string& problem) {
  std::cerr << problem << "\nusage: example_rabbitmq_ingress [--until-idle SECONDS]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);

  boxcar::examples::IngressOptions options;
  try {
    options = boxcar::examples::ingress_options_from_env();
  } catch (const std::invalid_argument& e) {
    return usage(e.what());
  }
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--until-idle" && i + 1 < argc) {
      const std::string_view value = argv[++i];
      double seconds = 0;
      const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
      if (error != std::errc() || end != value.data() + value.size() || seconds <= 0) {
        return usage("--until-idle needs a positive number of seconds");
      }
      options.until_idle = std::chrono::milliseconds(static_cast<long long>(seconds * 1000));
    } else {
      return usage("unknown argument " + std::string(arg));
    }
  }
  const char* url = std::getenv("BOXCAR_DATABASE_URL");
  if (!url || !*url) return usage("set BOXCAR_DATABASE_URL");
  const char* schema_env = std::getenv("BOXCAR_SCHEMA");
  const std::string schema = schema_env && *schema_env ? schema_env : "boxcar";
  if (const char* level = std::getenv("BOXCAR_LOG_LEVEL")) spdlog::set_level(spdlog::level::from_str(level));

  int status = 0;
  try {
    // No migrate here: the schema is migrated once, before the ingress starts, by the
    // migrator (`boxcar migrate --roles`); this process needs only the boxcar_ingress role.
    auto pool = boxcar::ConnectionPool::create({.url = url});
    boxcar::Inbox inbox(pool, {.schema = schema, .consumers = {options.consumer}});
    boxcar::examples::run_ingress(inbox, options, g_stop);
  } catch (const std::exception& e) {
    // Unsettled deliveries go back to the queue when the connection closes; a supervisor
    // restarts the process.
    std::cerr << "example_rabbitmq_ingress: " << e.what() << "\n";
    status = 1;
  }
  return status;
}
