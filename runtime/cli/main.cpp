// `boxcar`: the generic operator binary. Needs no application code.
//
//   boxcar migrate   [--database-url URL] [--schema NAME]
//   boxcar publisher [--database-url URL] [--schema NAME] [--kafka NAME=VALUE]...
//                    [--topic EVENT_TYPE=TOPIC]... [--batch-size N] [--max-attempts N]
//                    [--delivery-timeout-ms N] [--lease-ms N]
//
// Environment: BOXCAR_DATABASE_URL, BOXCAR_SCHEMA, and BOXCAR_KAFKA_<PROPERTY> for every
// librdkafka property (BOXCAR_KAFKA_BOOTSTRAP_SERVERS=... is bootstrap.servers=...,
// BOXCAR_KAFKA_SECURITY_PROTOCOL=SASL_SSL is security.protocol=SASL_SSL). Flags win.
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "boxcar/publisher/publisher.hpp"
#include "boxcar/runtime/error.hpp"
#include "boxcar/runtime/migrate.hpp"
#include "boxcar/runtime/shutdown_signals.hpp"

extern char** environ;

namespace {

constexpr const char* kUsage =
    "usage: boxcar migrate   [--database-url URL] [--schema NAME]\n"
    "       boxcar publisher [--database-url URL] [--schema NAME] [--kafka NAME=VALUE]...\n"
    "                        [--topic EVENT_TYPE=TOPIC]... [--batch-size N] [--max-attempts N]\n"
    "                        [--delivery-timeout-ms N] [--lease-ms N]\n"
    "  --database-url  libpq URL (default: $BOXCAR_DATABASE_URL)\n"
    "  --schema        schema holding Boxcar's tables (default: $BOXCAR_SCHEMA or boxcar)\n"
    "  --kafka         a librdkafka property (also BOXCAR_KAFKA_<NAME> with '.' as '_')\n"
    "  --topic         publish events of EVENT_TYPE to TOPIC instead of their own topic\n";

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : std::move(fallback);
}

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& key) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw boxcar::ConfigError(key, "expects NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

int parse_int(const std::string& text, const std::string& key) {
  try {
    std::size_t used = 0;
    const int value = std::stoi(text, &used);
    if (used == text.size()) return value;
  } catch (const std::exception&) {
  }
  throw boxcar::ConfigError(key, "expects a whole number, got '" + text + "'");
}

// BOXCAR_KAFKA_BOOTSTRAP_SERVERS=x -> bootstrap.servers=x
std::map<std::string, std::string> kafka_properties_from_environment() {
  std::map<std::string, std::string> properties;
  const std::string prefix = "BOXCAR_KAFKA_";
  for (char** entry = environ; *entry; ++entry) {
    const std::string text = *entry;
    if (!text.starts_with(prefix)) continue;
    const auto eq = text.find('=');
    std::string name = text.substr(prefix.size(), eq - prefix.size());
    for (char& c : name) c = c == '_' ? '.' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    properties[name] = text.substr(eq + 1);
  }
  return properties;
}

struct Common {
  std::string url = env_or("BOXCAR_DATABASE_URL", "");
  std::string schema = env_or("BOXCAR_SCHEMA", "boxcar");
};

// Consumes the flags every command shares; returns false for an unknown one.
bool common_flag(Common& common, const std::vector<std::string>& args, std::size_t& i) {
  const auto value = [&]() -> std::string {
    if (i + 1 >= args.size()) throw boxcar::ConfigError(args[i], "expects a value");
    return args[++i];
  };
  if (args[i] == "--database-url") common.url = value();
  else if (args[i] == "--schema") common.schema = value();
  else return false;
  return true;
}

void require_url(const Common& common) {
  if (common.url.empty()) throw boxcar::ConfigError("BOXCAR_DATABASE_URL", "set it or pass --database-url");
}

int run_migrate(const std::vector<std::string>& args) {
  Common common;
  for (std::size_t i = 0; i < args.size(); ++i)
    if (!common_flag(common, args, i)) throw boxcar::ConfigError(args[i], "unknown option for 'boxcar migrate'");
  require_url(common);
  const auto report = boxcar::migrate(common.url, {.schema = common.schema});
  if (report.applied.empty()) {
    std::cout << "schema '" << common.schema << "' is up to date at version " << report.version << "\n";
  } else {
    for (int version : report.applied) std::cout << "applied migration " << version << "\n";
    std::cout << "schema '" << common.schema << "' is at version " << report.version << "\n";
  }
  return 0;
}

int run_publisher(const std::vector<std::string>& args) {
  boxcar::ShutdownSignals signals;  // before any thread starts
  Common common;
  boxcar::PublisherOptions options;
  options.kafka = kafka_properties_from_environment();
  bool lease_set = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (common_flag(common, args, i)) continue;
    const auto value = [&]() -> std::string {
      if (i + 1 >= args.size()) throw boxcar::ConfigError(args[i], "expects a value");
      return args[++i];
    };
    const std::string flag = args[i];
    if (flag == "--kafka") {
      const auto [name, v] = split_assignment(value(), flag);
      options.kafka[name] = v;
    } else if (flag == "--topic") {
      const auto [type, topic] = split_assignment(value(), flag);
      options.topic_overrides[type] = topic;
    } else if (flag == "--batch-size") {
      const int n = parse_int(value(), flag);
      if (n < 1) throw boxcar::ConfigError(flag, "must be at least 1");
      options.batch_size = static_cast<std::size_t>(n);
    } else if (flag == "--max-attempts") {
      options.max_attempts = parse_int(value(), flag);
    } else if (flag == "--delivery-timeout-ms") {
      options.delivery_timeout = std::chrono::milliseconds(parse_int(value(), flag));
      if (!lease_set) options.lease = options.delivery_timeout + std::chrono::seconds(60);
    } else if (flag == "--lease-ms") {
      options.lease = std::chrono::milliseconds(parse_int(value(), flag));
      lease_set = true;
    } else {
      throw boxcar::ConfigError(flag, "unknown option for 'boxcar publisher'");
    }
  }
  require_url(common);
  if (!options.kafka.contains("bootstrap.servers"))
    throw boxcar::ConfigError("BOXCAR_KAFKA_BOOTSTRAP_SERVERS", "set it or pass --kafka bootstrap.servers=HOST:PORT");
  options.schema = common.schema;
  auto pool = boxcar::ConnectionPool::create({.url = common.url, .size = 4});
  boxcar::Publisher publisher(pool, options);
  publisher.start();
  const int signal = signals.wait_for_shutdown();
  spdlog::info("signal {} received: finishing the batch in flight (a second signal exits at once)", signal);
  publisher.stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + (argc > 1 ? 2 : 1), argv + argc);
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "migrate") return run_migrate(args);
    if (command == "publisher") return run_publisher(args);
    if (command == "--help" || command == "-h" || command == "help") {
      std::cout << kUsage;
      return 0;
    }
    std::cerr << (command.empty() ? "missing command\n" : "unknown command '" + command + "'\n") << kUsage;
    return 2;
  } catch (const boxcar::ConfigError& e) {
    std::cerr << "boxcar: " << e.code() << ": " << e.what() << "\n";
    return 2;
  } catch (const boxcar::Error& e) {
    std::cerr << "boxcar: " << e.code() << ": " << e.what() << "\n";
    return 1;
  }
}
