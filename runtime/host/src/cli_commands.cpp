// status / dead / purge on the command line: argument parsing and output; the work is
// done by operator.hpp.
#include "cli_commands.hpp"

#include <cstdlib>
#include <ostream>

#include "boxcar/host/operator.hpp"
#include "boxcar/runtime/connection_pool.hpp"
#include "boxcar/runtime/error.hpp"

namespace boxcar::detail {
namespace {

struct Args {
  std::vector<std::string> positional;
  std::vector<std::pair<std::string, std::string>> options;  // --name value
  std::vector<std::string> switches;                         // --name
  bool has(const std::string& name) const {
    return std::find(switches.begin(), switches.end(), name) != switches.end();
  }
};

// Options that take no value; every other --option takes one.
bool is_switch(const std::string& name) {
  return name == "--json" || name == "--dry-run" || name == "--all" || name == "--group";
}

Args parse(const std::vector<std::string>& raw) {
  Args args;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    if (!raw[i].starts_with("--")) {
      args.positional.push_back(raw[i]);
    } else if (is_switch(raw[i])) {
      args.switches.push_back(raw[i]);
    } else {
      if (i + 1 >= raw.size()) throw ConfigError(raw[i], "expects a value");
      args.options.emplace_back(raw[i], raw[i + 1]);
      ++i;
    }
  }
  return args;
}

long long number(const std::string& name, const std::string& value) {
  try {
    std::size_t used = 0;
    const long long n = std::stoll(value, &used);
    if (used == value.size() && n >= 0) return n;
  } catch (const std::exception&) {
  }
  throw ConfigError(name, "expects a whole number, got '" + value + "'");
}

// 90s, 15m, 2h, 7d (a bare number is seconds).
std::chrono::seconds duration(const std::string& name, const std::string& value) {
  if (value.empty()) throw ConfigError(name, "expects a duration like 90s, 15m, 2h or 7d");
  const char unit = value.back();
  const bool has_unit = unit == 's' || unit == 'm' || unit == 'h' || unit == 'd';
  const long long n = number(name, has_unit ? value.substr(0, value.size() - 1) : value);
  const long long factor = unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 1;
  return std::chrono::seconds(n * factor);
}

DeadFilter filter_from(const Args& args, const std::string& command) {
  DeadFilter filter;
  for (const auto& [name, value] : args.options) {
    if (name == "--id") filter.ids.push_back(number(name, value));
    else if (name == "--consumer") filter.consumer = value;
    else if (name == "--event-type") filter.event_type = value;
    else if (name == "--error") filter.error_contains = value;
    else if (name == "--older-than") filter.older_than = duration(name, value);
    else if (name == "--failure-group") filter.group = value;
    else if (name == "--limit") filter.limit = static_cast<std::size_t>(number(name, value));
    else if (name != "--kind" && name != "--actor") throw ConfigError(name, "unknown option for 'dead " + command + "'");
  }
  filter.all = args.has("--all");
  return filter;
}

RecordKind kind_from(const Args& args) {
  for (const auto& [name, value] : args.options)
    if (name == "--kind") {
      if (value == "inbox") return RecordKind::Inbox;
      if (value == "outbox") return RecordKind::Outbox;
      throw ConfigError("--kind", "expects inbox or outbox, got '" + value + "'");
    }
  return RecordKind::Inbox;
}

std::string actor_from(const Args& args) {
  for (const auto& [name, value] : args.options)
    if (name == "--actor") return value;
  const char* user = std::getenv("USER");
  return std::string("cli:") + (user && *user ? user : "unknown");
}

int dead(ConnectionPool& pool, const RuntimeConfig& config, const Args& args, std::ostream& out) {
  if (args.positional.empty()) throw ConfigError("dead", "usage: dead list|show|retry|discard [options]");
  const std::string& action = args.positional[0];
  const RecordKind kind = kind_from(args);
  const bool json = args.has("--json");
  if (action == "list") {
    const DeadFilter filter = filter_from(args, action);
    if (args.has("--group")) {
      const auto groups = dead_groups(pool, config.schema, kind, filter);
      out << (json ? to_json(groups).dump(2) + "\n" : to_table(groups));
    } else {
      const auto records = dead_list(pool, config.schema, kind, filter);
      out << (json ? to_json(records).dump(2) + "\n" : to_table(records));
    }
    return 0;
  }
  if (action == "show") {
    if (args.positional.size() != 2) throw ConfigError("dead show", "usage: dead show ID [--kind inbox|outbox]");
    const auto record = dead_show(pool, config.schema, kind, number("ID", args.positional[1]));
    out << (json ? to_json(record).dump(2) + "\n" : to_table(record));
    return 0;
  }
  if (action == "retry" || action == "discard") {
    const DeadFilter filter = filter_from(args, action);
    const bool dry_run = args.has("--dry-run");
    const auto result = action == "retry" ? dead_retry(pool, config.schema, kind, filter, actor_from(args), dry_run)
                                          : dead_discard(pool, config.schema, kind, filter, actor_from(args), dry_run);
    if (json) {
      out << to_json(result).dump(2) << "\n";
    } else {
      out << (dry_run ? "would " : "") << action << " " << result.ids.size() << " DEAD " << to_string(kind)
          << " record(s)" << (result.limit_reached ? " (limit reached: run again for more)" : "") << "\n";
      for (const auto id : result.ids) out << "  " << id << "\n";
    }
    return 0;
  }
  throw ConfigError("dead", "unknown action '" + action + "' (list, show, retry, discard)");
}

int purge_command(ConnectionPool& pool, const RuntimeConfig& config, const Args& args, std::ostream& out) {
  PurgeOptions options;
  for (const auto& [name, value] : args.options) {
    if (name == "--inbox-days") options.inbox_retention = std::chrono::hours(24 * number(name, value));
    else if (name == "--outbox-days") options.outbox_retention = std::chrono::hours(24 * number(name, value));
    else if (name == "--batch-size") options.batch_size = static_cast<std::size_t>(number(name, value));
    else throw ConfigError(name, "unknown option for 'purge'");
  }
  options.dry_run = args.has("--dry-run");
  const auto report = purge(pool, config.schema, options);
  out << (args.has("--json") ? to_json(report).dump(2) + "\n" : to_table(report));
  return 0;
}

}  // namespace

int run_operator_command(const RuntimeConfig& config, const std::string& command,
                         const std::vector<std::string>& raw, std::ostream& out) {
  const Args args = parse(raw);
  auto pool = ConnectionPool::create({.url = config.database_url, .size = 2});
  if (command == "status") {
    const auto report = status(*pool, config.schema, config.consumers);
    out << (args.has("--json") ? to_json(report).dump(2) + "\n" : to_table(report));
    return 0;
  }
  if (command == "dead") return dead(*pool, config, args, out);
  return purge_command(*pool, config, args, out);
}

}  // namespace boxcar::detail
