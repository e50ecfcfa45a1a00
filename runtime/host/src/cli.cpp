// run_cli(): the standard sub-commands of a Boxcar process.
#include <iostream>
#include <map>

#include <spdlog/spdlog.h>

#include "boxcar/host/config.hpp"
#include "boxcar/host/runtime.hpp"
#include "boxcar/runtime/logging.hpp"
#include "boxcar/runtime/migrate.hpp"
#include "boxcar/runtime/shutdown_signals.hpp"
#include "cli_commands.hpp"
#include "logging_setup.hpp"

namespace boxcar {
namespace {

constexpr const char* kUsage = R"(usage: PROGRAM [OPTIONS] COMMAND [ARGS]

commands:
  worker | publisher | all | ingress   run that role until SIGTERM/SIGINT (a second signal exits at once)
  migrate                              apply the schema migrations
  status [--json]                      backlog per consumer and status, outbox state
  dead list|show|retry|discard ...     operator recovery of DEAD records (see docs/operator.md)
  purge [--inbox-days N] [--outbox-days N] [--batch-size N] [--dry-run]
  config check                         print the effective configuration, secrets redacted

options (precedence: defaults < --config file < BOXCAR_* environment < flags):
  --config FILE            JSON configuration file (also BOXCAR_CONFIG)
  --database-url URL       database.url (BOXCAR_DATABASE_URL)
  --schema NAME            schema (BOXCAR_SCHEMA)
  --consumers A,B          consumers (BOXCAR_CONSUMERS)
  --http-listen HOST:PORT  http.listen; empty disables (BOXCAR_HTTP_LISTEN)
  --kafka NAME=VALUE       a librdkafka property (BOXCAR_KAFKA_<NAME>)
  --topic TYPE=TOPIC       publisher.topics entry
  --set KEY=VALUE          any configuration key (docs/runtime.md)
)";

std::pair<std::string, std::string> split_assignment(const std::string& text, const std::string& flag) {
  const auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw ConfigError(flag, "expects NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

struct CommandLine {
  ConfigSources sources;
  std::vector<std::string> command;  // sub-command and its own arguments
};

CommandLine parse(int argc, char** argv) {
  static const std::map<std::string, std::string> shorthands = {
      {"--config", "config"},           {"--database-url", "database.url"}, {"--schema", "schema"},
      {"--consumers", "consumers"},     {"--http-listen", "http.listen"},   {"--log-format", "log.format"},
      {"--log-level", "log.level"}};
  CommandLine line;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (!line.command.empty() || !arg.starts_with("--")) {
      line.command.push_back(arg);
      continue;
    }
    if (arg == "--help") {
      line.command = {"help"};
      return line;
    }
    if (i + 1 >= argc) throw ConfigError(arg, "expects a value");
    const std::string value = argv[++i];
    if (const auto s = shorthands.find(arg); s != shorthands.end()) {
      line.sources.flags.emplace_back(s->second, value);
    } else if (arg == "--set") {
      line.sources.flags.push_back(split_assignment(value, arg));
    } else if (arg == "--kafka") {
      const auto [name, v] = split_assignment(value, arg);
      line.sources.flags.emplace_back("kafka." + name, v);
    } else if (arg == "--topic") {
      const auto [type, topic] = split_assignment(value, arg);
      line.sources.flags.emplace_back("publisher.topics." + type, topic);
    } else {
      throw ConfigError(arg, "unknown option");
    }
  }
  return line;
}

int run_role(Role role, const RuntimeConfig& config, const Runtime::HandlerFactory& handlers, ShutdownSignals& signals) {
  Runtime runtime(config);
  std::vector<HandlerRegistration> registrations;
  if ((role == Role::Worker || role == Role::All) && handlers) registrations = handlers(runtime);
  if (role == Role::Ingress) runtime.inbox();  // validates the declared consumers now
  runtime.start(role, std::move(registrations));
  const int signal = signals.wait_for_shutdown();
  logger("runtime")->info("signal {} received: draining (a second signal exits at once)", signal);
  runtime.stop();
  return runtime.abandoned_handlers() == 0 ? 0 : 1;  // a handler thread may still be running
}

}  // namespace

int run_cli(int argc, char** argv, Runtime::HandlerFactory handlers) {
  ShutdownSignals signals;  // before any thread starts, so only sigwait sees SIGTERM/SIGINT
  std::string usage = kUsage;
  usage.replace(usage.find("PROGRAM"), 7, argc > 0 ? argv[0] : "boxcar");
  try {
    CommandLine line = parse(argc, argv);
    if (line.command.empty() || line.command[0] == "help") {
      (line.command.empty() ? std::cerr : std::cout) << usage;
      return line.command.empty() ? 2 : 0;
    }
    const std::string& command = line.command[0];
    const std::vector<std::string> args(line.command.begin() + 1, line.command.end());
    const RuntimeConfig config = load_config(line.sources);
    detail::configure_logging(config.log_format, config.log_level);

    if ((command == "worker" || command == "all") && !handlers)
      throw ConfigError(command, "this binary registers no handlers: run the worker from your application's "
                                 "binary, which calls boxcar::run_cli with its handlers");
    if (command == "worker") return run_role(Role::Worker, config, handlers, signals);
    if (command == "publisher") return run_role(Role::Publisher, config, handlers, signals);
    if (command == "all") return run_role(Role::All, config, handlers, signals);
    if (command == "ingress") return run_role(Role::Ingress, config, handlers, signals);
    if (command == "migrate") {
      const auto report = migrate(config.database_url, {.schema = config.schema});
      for (int version : report.applied) std::cout << "applied migration " << version << "\n";
      std::cout << "schema '" << config.schema << "' is at version " << report.version << "\n";
      return 0;
    }
    if (command == "config") {
      if (args.size() != 1 || args[0] != "check") throw ConfigError("config", "usage: config check");
      for (const auto& [key, value] : describe(config)) std::cout << key << " = " << value << "\n";
      std::cout << "configuration is valid\n";
      return 0;
    }
    if (command == "status" || command == "dead" || command == "purge")
      return detail::run_operator_command(config, command, args, std::cout);
    std::cerr << "unknown command '" << command << "'\n" << usage;
    return 2;
  } catch (const ConfigError& e) {
    std::cerr << argv[0] << ": " << e.code() << ": " << e.what() << "\n";
    return 2;
  } catch (const Error& e) {
    std::cerr << argv[0] << ": " << e.code() << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << argv[0] << ": " << e.what() << "\n";
    return 1;
  }
}

}  // namespace boxcar
