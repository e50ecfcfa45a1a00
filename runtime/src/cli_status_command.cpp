// `boxcar status` on the command line: the table or the versioned JSON document once,
// `--watch` to redraw it every few seconds until SIGINT/SIGTERM, and `--check`, the
// readiness probe of scripts (exit 0 or 3). docs/operator.md describes every option.
#include "cli_status_command.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/redaction.hpp"
#include "boxcar/ops/operator.hpp"
#include "database_probe.hpp"
#include "schema_readiness.hpp"

namespace boxcar::detail {
namespace {

constexpr double kDefaultWatchSeconds = 2.0;
// Below this a refresh (a full count of both tables) would run back to back.
constexpr double kMinWatchSeconds = 0.1;

// "2", "0.5", "10": seconds, at least kMinWatchSeconds; nullopt when malformed.
std::optional<double> parse_seconds(const std::string& value) {
  if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789.") != std::string::npos ||
      value.find('.') != value.rfind('.') || value.front() == '.' || value.back() == '.')
    return std::nullopt;
  const double seconds = std::stod(value);
  return seconds >= kMinWatchSeconds ? std::optional<double>(seconds) : std::nullopt;
}

const CLI::Validator kWatchSeconds(
    [](std::string& value) {
      // An empty value is `--watch` alone: the default interval.
      return value.empty() || parse_seconds(value)
                 ? std::string()
                 : "expects seconds (at least 0.1), like 2 or 0.5, got '" + value + "'";
    },
    "");

const CLI::Validator kPositiveCount(
    [](std::string& value) {
      const bool ok = !value.empty() && value.size() <= 9 &&
                      value.find_first_not_of("0123456789") == std::string::npos && std::stoll(value) > 0;
      return ok ? std::string() : "expects a whole number of at least 1, got '" + value + "'";
    },
    "");

struct StatusFlags {
  bool json = false;
  bool check = false;
  std::string watch;  // seconds; "" with --watch alone
  std::size_t count = 0;
  const CLI::Option* watch_option = nullptr;

  bool watching() const { return watch_option->count() > 0; }
  std::chrono::milliseconds interval() const {
    const double seconds = watch.empty() ? kDefaultWatchSeconds : *parse_seconds(watch);
    return std::chrono::milliseconds(static_cast<long long>(seconds * 1000.0));
  }
};

std::shared_ptr<ConnectionPool> status_pool(const RuntimeConfig& config) {
  PoolOptions options = config.pool;
  options.size = 1;
  return ConnectionPool::create(std::move(options));
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buffer[32];
  std::strftime(buffer, sizeof buffer, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buffer;
}

std::string seconds_text(std::chrono::milliseconds interval) {
  char buffer[32];
  const long long ms = interval.count();
  if (ms % 1000 == 0)
    std::snprintf(buffer, sizeof buffer, "%llds", ms / 1000);
  else
    std::snprintf(buffer, sizeof buffer, "%.1fs", static_cast<double>(ms) / 1000.0);
  return buffer;
}

// `status --check`: the database and migrations inputs of /readyz, asked once.
ExitCode check_readiness(const RuntimeConfig& config, std::ostream& out) {
  DatabaseProbe probe(status_pool(config)->connection_string(), config.schema);
  const auto answer = probe.probe();
  if (!answer.schema) {
    out << "not ready: database unreachable: " << answer.error << "\n";
    return ExitCode::NotReady;
  }
  const auto schema = schema_readiness(answer.schema);
  if (!schema.ok) {
    out << "not ready: schema '" << config.schema << "': " << schema.why << "\n";
    return ExitCode::NotReady;
  }
  out << "ready: database answers, schema '" << config.schema << "': " << answer.schema->detail << "\n";
  return ExitCode::Ok;
}

// One snapshot as the command prints it; a failure is caught, shown and mapped, so
// that --watch keeps going through a database outage (the way watch(1) shows a failing
// command's output).
struct Snapshot {
  std::string text;
  ExitCode code = ExitCode::Ok;
};

Snapshot take_snapshot(const RuntimeConfig& config, std::shared_ptr<ConnectionPool>& pool, bool json) {
  try {
    if (!pool) pool = status_pool(config);
    const auto report = status(*pool, config.schema, config.consumers);
    if (!json) return {to_table(report), ExitCode::Ok};
    return {to_json(report).dump() + "\n", ExitCode::Ok};
  } catch (const Error& e) {
    pool.reset();  // the next refresh starts from a new connection
    return {"error: " + e.code() + ": " + redact_secrets(e.what()) + "\n", exit_code_of(e)};
  } catch (const std::exception& e) {
    pool.reset();
    return {"error: " + redact_secrets(e.what()) + "\n", exit_code_of(e)};
  }
}

// --watch: a terminal gets the screen cleared and redrawn under a header, like
// watch(1); anything else (a pipe, a file) gets each snapshot after its header line,
// with no escape codes. With --json every snapshot is one line (JSON Lines) and a
// failed one goes to stderr. Stops on SIGINT/SIGTERM (exit 0) or after --count
// snapshots (the exit code of the last one).
ExitCode watch_status(const RuntimeConfig& config, const StatusFlags& flags, std::ostream& out, bool terminal,
                      ShutdownSignals& signals) {
  const auto interval = flags.interval();
  std::shared_ptr<ConnectionPool> pool;
  for (std::size_t taken = 1;; ++taken) {
    const Snapshot snapshot = take_snapshot(config, pool, flags.json);
    if (flags.json) {
      (snapshot.code == ExitCode::Ok ? out : std::cerr) << snapshot.text;
    } else {
      const std::string header = "Every " + seconds_text(interval) + ": boxcar status (schema " + config.schema +
                                 ", Ctrl-C to stop)    " + utc_now() + "\n\n";
      if (terminal) out << "\033[H\033[2J";  // cursor home, clear screen
      out << (taken > 1 && !terminal ? "\n" : "") << header << snapshot.text;
    }
    out.flush();
    if (flags.count > 0 && taken >= flags.count) return snapshot.code;
    if (signals.wait_for_shutdown(interval)) return ExitCode::Ok;
  }
}

}  // namespace

void add_status_command(CommandTree& tree, std::ostream& out, bool out_is_terminal, ShutdownSignals& signals) {
  auto flags = std::make_shared<StatusFlags>();
  const auto run = [flags, &out, out_is_terminal, &signals](const RuntimeConfig& config) {
    if (flags->check) return check_readiness(config, out);
    if (flags->watching()) return watch_status(config, *flags, out, out_is_terminal, signals);
    const auto report = status(*status_pool(config), config.schema, config.consumers);
    out << (flags->json ? to_json(report).dump(2) + "\n" : to_table(report));
    return ExitCode::Ok;
  };
  CLI::App& command = tree.add(tree.root(), "status", "backlog per consumer and status, outbox state", run);
  CLI::Option* json =
      command.add_flag("--json", flags->json, "machine-readable output (docs/operator.md, \"JSON formats\")");
  CLI::Option* watch =
      command
          .add_option("--watch", flags->watch, "redraw every SECONDS (default 2) until Ctrl-C/SIGTERM, like watch(1)")
          ->expected(0, 1)
          ->type_name("[SECONDS]")
          ->check(kWatchSeconds);
  command.add_option("--count", flags->count, "with --watch: stop after N snapshots")
      ->type_name("N")
      ->check(kPositiveCount)
      ->needs(watch);
  command
      .add_flag("--check", flags->check,
                "readiness probe: exit 0 when the database answers and its migrations suit this build, else 3")
      ->excludes(json)
      ->excludes(watch);
  flags->watch_option = watch;
}

}  // namespace boxcar::detail
