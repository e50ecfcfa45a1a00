// The command tree of run_cli, on CLI11. Every command, and the program itself, accepts
// the configuration flags (--database-url, --schema, --set KEY=VALUE, ...), so
// `boxcar --schema s status` and `boxcar status --schema s` mean the same; anything a
// command does not know, before or after it, is a usage error that names it.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "boxcar/runtime/config.hpp"
#include "cli_exit_codes.hpp"

namespace boxcar::detail {

/// A command-line flag that sets configuration (a shorthand for --set KEY=VALUE).
struct ConfigFlag {
  std::string name;        // "--database-url"
  std::string key;         // "database.url"; for `assignment` flags the key prefix ("kafka.", "" for --set)
  std::string value_name;  // "URL", shown in --help
  std::string description;
  bool assignment = false;  // the value is NAME=VALUE and NAME completes the key
};

/// What a command does once the configuration is loaded; returns its exit code (an error
/// it throws is mapped by exit_code_of()).
using CommandRunner = std::function<ExitCode(const RuntimeConfig&)>;

class CommandTree {
 public:
  /// `program` names the binary in --help and in errors.
  explicit CommandTree(const std::string& program, const std::string& description);

  CLI::App& root() noexcept { return root_; }

  /// Adds the command `name` under `parent`, with the configuration flags plus
  /// `extra_flags` (command-specific shorthands such as the publisher's --batch-size).
  /// A command without a runner requires one of its own sub-commands. Returns the
  /// CLI11 command, to add the command's own options to.
  CLI::App& add(CLI::App& parent, const std::string& name, const std::string& description, CommandRunner runner = {},
                const std::vector<ConfigFlag>& extra_flags = {});

  /// @throws CLI::ParseError (CLI::CallForHelp for --help).
  void parse(int argc, char** argv);

  /// The deepest command selected so far (the root when none was); valid after a
  /// failed parse too.
  const CLI::App& chosen() const;
  /// "boxcar dead retry": the program and the chosen commands.
  std::string chosen_path() const;
  /// The runner of the chosen command (empty for the root or a command group).
  CommandRunner runner() const;

  /// The configuration flags given on the command line, in the order given (the
  /// program's, then each command's), ready for load_config().
  /// @throws ConfigError naming the flag when a NAME=VALUE flag has no '='.
  ConfigSources sources() const;

 private:
  void add_config_flags(CLI::App& app, const std::vector<ConfigFlag>& flags);

  CLI::App root_;
  std::map<const CLI::Option*, ConfigFlag> config_flags_;
  std::map<const CLI::App*, CommandRunner> runners_;
};

}  // namespace boxcar::detail
