// run_cli(): the standard sub-commands of a Boxcar process (docs/runtime.md). Parsing is
// CLI11's (cli_command_tree.hpp); this file holds the roles, migrate and config check;
// failures become exit codes through cli_exit_codes.hpp.
#include <unistd.h>

#include <iostream>
#include <memory>

#include <spdlog/spdlog.h>

#include "boxcar/runtime/config.hpp"
#include "boxcar/runtime/runtime.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/redaction.hpp"
#include "boxcar/core/roles.hpp"
#include "boxcar/core/shutdown_signals.hpp"
#include "cli_command_tree.hpp"
#include "cli_commands.hpp"
#include "cli_exit_codes.hpp"
#include "cli_status_command.hpp"
#include "logging_setup.hpp"

namespace boxcar {
namespace {

using detail::exit_code_of;
using detail::exit_status;
using detail::ExitCode;

ExitCode run_role(Role role, const RuntimeConfig& config, const Runtime::HandlerFactory& handlers,
                  ShutdownSignals& signals) {
  Runtime runtime(config);
  std::vector<HandlerRegistration> registrations;
  if ((role == Role::Worker || role == Role::All) && handlers) registrations = handlers(runtime);
  if (role == Role::Ingress) runtime.inbox();  // validates the declared consumers now
  runtime.start(role, std::move(registrations));
  const int signal = signals.wait_for_shutdown();
  logger("runtime")->info("signal {} received: draining (a second signal exits at once)", signal);
  runtime.stop();
  // A handler thread may still be running.
  return runtime.abandoned_handlers() == 0 ? ExitCode::Ok : ExitCode::Failure;
}

void add_role_commands(detail::CommandTree& tree, const Runtime::HandlerFactory& handlers, ShutdownSignals& signals) {
  const std::string needs_handlers = handlers ? "" : " (needs an application's binary)";
  const auto role = [&handlers, &signals](Role r, const std::string& name) {
    return [&handlers, &signals, r, name](const RuntimeConfig& config) {
      if ((r == Role::Worker || r == Role::All) && !handlers)
        throw ConfigError(name,
                          "this binary registers no handlers: run the worker from your application's "
                          "binary, which calls boxcar::run_cli with its handlers");
      return run_role(r, config, handlers, signals);
    };
  };
  const std::string until = " until SIGTERM/SIGINT";
  tree.add(tree.root(), "worker", "run the inbox worker" + until + needs_handlers, role(Role::Worker, "worker"));
  tree.add(tree.root(), "publisher", "run the outbox publisher" + until, role(Role::Publisher, "publisher"),
           {{"--batch-size", "publisher.batch_size", "N", "events per batch (publisher.batch_size)"}});
  tree.add(tree.root(), "all", "run worker and publisher" + until + needs_handlers, role(Role::All, "all"));
  tree.add(tree.root(), "ingress", "run the HTTP endpoints and backlog metrics, claiming nothing," + until,
           role(Role::Ingress, "ingress"));
}

void add_schema_commands(detail::CommandTree& tree) {
  // --roles: after migrating, the least-privilege group roles and their grants (roles.hpp).
  struct RolesFlags {
    bool apply = false;
    std::string prefix = RolesOptions{}.role_prefix;
  };
  auto roles = std::make_shared<RolesFlags>();
  tree.add(tree.root(), "migrate", "apply the schema migrations", [roles](const RuntimeConfig& config) {
    if (roles->apply) role_names({.role_prefix = roles->prefix});  // a bad prefix fails before migrating
    // A session of its own (the migration lock is a session advisory lock): not through
    // a transaction pooler (database.session_url, docs/operations.md "PgBouncer").
    const std::string& url = config.pool.session_url.empty() ? config.pool.url : config.pool.session_url;
    const auto report = migrate(url, {.schema = config.schema});
    if (report.lock_waited.count() > 0)
      std::cout << "waited " << report.lock_waited.count() << " ms for another runner's migration lock\n";
    for (const auto& retry : report.lock_retries)
      std::cout << "migration " << retry.version << " hit lock_timeout (attempt " << retry.attempt
                << "), retried after " << retry.backoff.count() << " ms: " << retry.reason << "\n";
    for (int version : report.applied) std::cout << "applied migration " << version << "\n";
    std::cout << "schema '" << config.schema << "' is at version " << report.version << "\n";
    // A schema a newer release migrated: say whether this build may run against it.
    if (report.version > latest_migration_version())
      std::cout << check_schema_compatibility(url, {.schema = config.schema}).detail << "\n";
    if (roles->apply) {
      const auto granted = apply_roles(url, {.schema = config.schema, .role_prefix = roles->prefix});
      for (const auto& role : granted.created) std::cout << "created role " << role << "\n";
      std::cout << "roles " << roles->prefix << "{migrator,ingress,worker,publisher,operator} granted on schema '"
                << config.schema << "'\n";
    }
    return ExitCode::Ok;
  });
  CLI::App& migrate_command = *tree.root().get_subcommand("migrate");
  migrate_command.add_flag("--roles", roles->apply,
                           "then create (when missing) and grant the least-privilege group roles (docs/security.md)");
  migrate_command.add_option("--role-prefix", roles->prefix, "prefix of the role names (default boxcar_)");
  CLI::App& config_command = tree.add(tree.root(), "config", "configuration commands");
  tree.add(config_command, "check", "print the effective configuration, secrets redacted",
           [](const RuntimeConfig& config) {
             for (const auto& [key, value] : describe(config)) std::cout << key << " = " << value << "\n";
             // No database here (config check runs offline); `boxcar migrate` and /readyz
             // compare this with the schema.
             std::cout << "this build knows migrations up to " << latest_migration_version()
                       << " and runs against newer schemas whose migrations are marked compatible\n";
             std::cout << "configuration is valid\n";
             return ExitCode::Ok;
           });
}

std::string program_name(int argc, char** argv) {
  const std::string path = argc > 0 && argv[0] ? argv[0] : "boxcar";
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// --help: the chosen command's help on stdout, Ok. Anything else: the error, which names
// the offending argument, on stderr, Usage; a missing command also gets the command list.
ExitCode usage(const detail::CommandTree& tree, const CLI::ParseError& error) {
  const CLI::App& command = tree.chosen();
  const std::string path = tree.chosen_path();
  // App::help(prefix) prints "Usage: <prefix> <name> ...": the prefix is the parent path.
  const auto help = [&] { return command.help(command.get_parent() ? path.substr(0, path.rfind(' ')) : ""); };
  if (error.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
    std::cout << help();
    return ExitCode::Ok;
  }
  const bool missing_command = dynamic_cast<const CLI::RequiredError*>(&error) != nullptr &&
                               command.get_require_subcommand_min() > 0 && command.get_subcommands().empty();
  if (missing_command && !command.remaining().empty()) {
    std::cerr << path << ": unknown command '" << command.remaining().front() << "'\n";
  } else {
    std::cerr << path << ": " << error.what() << "\n";
  }
  if (missing_command)
    std::cerr << help();
  else
    std::cerr << "Run '" << path << " --help' for its options.\n";
  return ExitCode::Usage;
}

}  // namespace

int run_cli(int argc, char** argv, Runtime::HandlerFactory handlers) {
  ShutdownSignals signals;  // before any thread starts, so only sigwait sees SIGTERM/SIGINT
  const std::string program = argc > 0 && argv[0] ? argv[0] : "boxcar";
  try {
    detail::CommandTree tree(program_name(argc, argv), "A Boxcar process: run a role, migrate, or operate a schema.");
    add_role_commands(tree, handlers, signals);
    add_schema_commands(tree);
    detail::add_status_command(tree, std::cout, isatty(STDOUT_FILENO) == 1, signals);
    detail::add_operator_commands(tree, std::cout);
    try {
      tree.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      return exit_status(usage(tree, e));
    }
    const RuntimeConfig config = load_config(tree.sources());
    detail::configure_logging(config.log_format, config.log_level);
    return exit_status(tree.runner()(config));
  } catch (const Error& e) {
    std::cerr << program << ": " << e.code() << ": " << redact_secrets(e.what()) << "\n";
    return exit_status(exit_code_of(e));
  } catch (const std::exception& e) {
    std::cerr << program << ": " << redact_secrets(e.what()) << "\n";
    return exit_status(exit_code_of(e));
  }
}

}  // namespace boxcar
