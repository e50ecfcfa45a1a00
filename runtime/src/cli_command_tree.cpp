// The command tree of run_cli: configuration flags on every command, runners per command.
#include "cli_command_tree.hpp"

#include "boxcar/core/error.hpp"

namespace boxcar::detail {
namespace {

// The configuration flags every command takes. Each is a shorthand for --set KEY=VALUE;
// docs/runtime.md lists them.
const std::vector<ConfigFlag>& standard_flags() {
  static const std::vector<ConfigFlag> flags = {
      {"--config", "config", "FILE", "JSON configuration file (also BOXCAR_CONFIG)"},
      {"--database-url", "database.url", "URL", "database.url: libpq URL (BOXCAR_DATABASE_URL)"},
      {"--schema", "schema", "NAME", "schema holding Boxcar's tables (BOXCAR_SCHEMA)"},
      {"--consumers", "consumers", "A,B", "declared consumers (BOXCAR_CONSUMERS)"},
      {"--http-listen", "http.listen", "HOST:PORT", "/metrics, /healthz, /readyz; empty disables (BOXCAR_HTTP_LISTEN)"},
      {"--log-format", "log.format", "text|json", "log.format (BOXCAR_LOG_FORMAT)"},
      {"--log-level", "log.level", "LEVEL", "log.level: trace ... off (BOXCAR_LOG_LEVEL)"},
      {"--kafka", "kafka.", "NAME=VALUE", "a librdkafka property (BOXCAR_KAFKA_<NAME>); repeatable", true},
      {"--topic", "publisher.topics.", "TYPE=TOPIC", "publish events of TYPE to TOPIC; repeatable", true},
      {"--set", "", "KEY=VALUE", "any configuration key (docs/runtime.md); repeatable", true},
  };
  return flags;
}

std::pair<std::string, std::string> config_entry(const ConfigFlag& flag, const std::string& value) {
  if (!flag.assignment) return {flag.key, value};
  const auto eq = value.find('=');
  if (eq == std::string::npos || eq == 0)
    throw ConfigError(flag.name, "expects " + flag.value_name + ", got '" + value + "'");
  return {flag.key + value.substr(0, eq), value.substr(eq + 1)};
}

}  // namespace

CommandTree::CommandTree(const std::string& program, const std::string& description) : root_(description, program) {
  root_.require_subcommand(1);
  root_.footer(
      "Configuration precedence: defaults < --config file < BOXCAR_* environment < flags.\n"
      "Configuration flags work before or after the command.\n"
      "Run '" +
      program + " COMMAND --help' for the options of a command.");
  add_config_flags(root_, {});
}

CLI::App& CommandTree::add(CLI::App& parent, const std::string& name, const std::string& description,
                           CommandRunner runner, const std::vector<ConfigFlag>& extra_flags) {
  CLI::App& command = *parent.add_subcommand(name, description);
  add_config_flags(command, extra_flags);
  command.footer(
      "Configuration flags work before or after the command.\n"
      "Precedence: defaults < --config file < BOXCAR_* environment < flags.");
  if (runner)
    runners_[&command] = std::move(runner);
  else
    command.require_subcommand(1);
  return command;
}

void CommandTree::add_config_flags(CLI::App& app, const std::vector<ConfigFlag>& extra_flags) {
  std::vector<ConfigFlag> flags = standard_flags();
  flags.insert(flags.end(), extra_flags.begin(), extra_flags.end());
  for (const auto& flag : flags) {
    // TakeAll: a flag may repeat (--kafka a=1 --kafka b=2); for plain keys the last wins
    // because sources() keeps the command-line order and load_config applies in order.
    CLI::Option* option = app.add_option(flag.name, flag.description)
                              ->type_name(flag.value_name)
                              ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
                              ->group("Configuration");
    config_flags_[option] = flag;
  }
}

void CommandTree::parse(int argc, char** argv) { root_.parse(argc, argv); }

const CLI::App& CommandTree::chosen() const {
  const CLI::App* app = &root_;
  for (auto selected = app->get_subcommands(); !selected.empty(); selected = app->get_subcommands())
    app = selected.front();
  return *app;
}

std::string CommandTree::chosen_path() const {
  std::vector<std::string> names;
  for (const CLI::App* app = &chosen(); app != nullptr; app = app->get_parent()) names.push_back(app->get_name());
  std::string path;
  for (auto name = names.rbegin(); name != names.rend(); ++name) path += (path.empty() ? "" : " ") + *name;
  return path;
}

CommandRunner CommandTree::runner() const {
  const auto found = runners_.find(&chosen());
  return found == runners_.end() ? CommandRunner{} : found->second;
}

ConfigSources CommandTree::sources() const {
  std::vector<const CLI::App*> path;
  for (const CLI::App* app = &chosen(); app != nullptr; app = app->get_parent()) path.insert(path.begin(), app);
  ConfigSources sources;
  for (const CLI::App* app : path) {
    // parse_order() lists an option once per occurrence; the n-th occurrence's value is
    // the option's n-th result (each takes exactly one value).
    std::map<const CLI::Option*, std::size_t> seen;
    for (const CLI::Option* option : app->parse_order()) {
      const auto flag = config_flags_.find(option);
      if (flag == config_flags_.end()) continue;
      const std::size_t index = seen[option]++;
      if (index < option->results().size())
        sources.flags.push_back(config_entry(flag->second, option->results()[index]));
    }
  }
  return sources;
}

}  // namespace boxcar::detail
