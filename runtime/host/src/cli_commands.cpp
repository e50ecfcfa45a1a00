// status / dead / purge on the command line: options and output; the work is done by
// operator.hpp. docs/operator.md describes every option.
#include "cli_commands.hpp"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>

#include "boxcar/host/operator.hpp"
#include "boxcar/runtime/connection_pool.hpp"

namespace boxcar::detail {
namespace {

std::shared_ptr<ConnectionPool> operator_pool(const RuntimeConfig& config) {
  return ConnectionPool::create({.url = config.database_url, .size = 2});
}

// 90s, 15m, 2h, 7d (a bare number is seconds); nullopt when malformed.
std::optional<std::chrono::seconds> parse_duration(const std::string& value) {
  if (value.empty()) return std::nullopt;
  const char unit = value.back();
  const bool has_unit = unit == 's' || unit == 'm' || unit == 'h' || unit == 'd';
  const std::string digits = has_unit ? value.substr(0, value.size() - 1) : value;
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 12)
    return std::nullopt;
  const long long factor = unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 1;
  return std::chrono::seconds(std::stoll(digits) * factor);
}

const CLI::Validator kDuration(
    [](std::string& value) {
      return parse_duration(value) ? std::string() : "expects a duration like 90s, 15m, 2h or 7d, got '" + value + "'";
    },
    "");

// Ids, counts and days: digits only, so "-1" or "x" is a usage error naming the option.
const CLI::Validator kWholeNumber(
    [](std::string& value) {
      const bool ok = !value.empty() && value.size() <= 15 && value.find_first_not_of("0123456789") == std::string::npos;
      return ok ? std::string() : "expects a whole number, got '" + value + "'";
    },
    "");

struct DeadOptions {
  std::vector<std::int64_t> ids;
  std::string consumer, event_type, error, older_than, failure_group;
  std::size_t limit = DeadFilter{}.limit;
  bool all = false;
  std::string kind = "inbox";
  std::string actor;
  bool group = false;
  bool dry_run = false;
  bool json = false;
  std::int64_t id = 0;  // dead show ID

  DeadFilter filter() const {
    return {.ids = ids, .consumer = consumer, .event_type = event_type, .error_contains = error,
            .older_than = older_than.empty() ? std::nullopt : parse_duration(older_than),
            .group = failure_group, .limit = limit, .all = all};
  }
  RecordKind record_kind() const { return parse_record_kind(kind); }
  std::string who() const {
    if (!actor.empty()) return actor;
    const char* user = std::getenv("USER");
    return std::string("cli:") + (user && *user ? user : "unknown");
  }
};

void add_kind_and_json(CLI::App& command, DeadOptions& o) {
  command.add_option("--kind", o.kind, "inbox (default) or outbox")->type_name("KIND")->check(CLI::IsMember({"inbox", "outbox"}));
  command.add_flag("--json", o.json, "machine-readable output");
}

// The filter of list, retry and discard (docs/operator.md, "Filters").
void add_filter(CLI::App& command, DeadOptions& o) {
  command.add_option("--id", o.ids, "this row id; repeatable")
      ->type_name("N")
      ->allow_extra_args(false)
      ->check(kWholeNumber);
  command.add_option("--consumer", o.consumer, "inbox consumer")->type_name("NAME");
  command.add_option("--event-type", o.event_type, "exact event type")->type_name("TYPE");
  command.add_option("--error", o.error, "case-insensitive substring of the last error")->type_name("TEXT");
  command.add_option("--older-than", o.older_than, "died longer ago than this (90s, 15m, 2h, 7d)")
      ->type_name("AGE")
      ->check(kDuration);
  command.add_option("--failure-group", o.failure_group, "a group key from 'dead list --group'")->type_name("KEY");
  command.add_option("--limit", o.limit, "at most N records (default 100)")->type_name("N")->check(kWholeNumber);
}

void add_status(CommandTree& tree, std::ostream& out) {
  auto json = std::make_shared<bool>(false);
  CLI::App& status_command = tree.add(tree.root(), "status", "backlog per consumer and status, outbox state",
                                      [json, &out](const RuntimeConfig& config) {
                                        const auto report = status(*operator_pool(config), config.schema, config.consumers);
                                        out << (*json ? to_json(report).dump(2) + "\n" : to_table(report));
                                        return 0;
                                      });
  status_command.add_flag("--json", *json, "machine-readable output");
}

void add_dead(CommandTree& tree, std::ostream& out) {
  CLI::App& dead = tree.add(tree.root(), "dead", "operator recovery of DEAD records (docs/operator.md)");

  auto list = std::make_shared<DeadOptions>();
  CLI::App& list_command = tree.add(dead, "list", "the DEAD records that match, oldest death first",
                                    [list, &out](const RuntimeConfig& config) {
                                      auto pool = operator_pool(config);
                                      if (list->group) {
                                        const auto groups = dead_groups(*pool, config.schema, list->record_kind(), list->filter());
                                        out << (list->json ? to_json(groups).dump(2) + "\n" : to_table(groups));
                                      } else {
                                        const auto records = dead_list(*pool, config.schema, list->record_kind(), list->filter());
                                        out << (list->json ? to_json(records).dump(2) + "\n" : to_table(records));
                                      }
                                      return 0;
                                    });
  add_filter(list_command, *list);
  list_command.add_flag("--group", list->group, "group them by failure fingerprint");
  add_kind_and_json(list_command, *list);

  auto show = std::make_shared<DeadOptions>();
  CLI::App& show_command = tree.add(dead, "show", "one DEAD record with its payload and metadata",
                                    [show, &out](const RuntimeConfig& config) {
                                      const auto record = dead_show(*operator_pool(config), config.schema,
                                                                    show->record_kind(), show->id);
                                      out << (show->json ? to_json(record).dump(2) + "\n" : to_table(record));
                                      return 0;
                                    });
  show_command.add_option("ID", show->id, "the row id")->required()->check(kWholeNumber);
  add_kind_and_json(show_command, *show);

  for (const std::string action : {"retry", "discard"}) {
    auto o = std::make_shared<DeadOptions>();
    const std::string description = action == "retry" ? "replay the matching DEAD records"
                                                       : "mark the matching DEAD records as dealt with";
    CLI::App& command = tree.add(dead, action, description, [o, action, &out](const RuntimeConfig& config) {
      auto pool = operator_pool(config);
      const RecordKind kind = o->record_kind();
      const auto result = action == "retry" ? dead_retry(*pool, config.schema, kind, o->filter(), o->who(), o->dry_run)
                                            : dead_discard(*pool, config.schema, kind, o->filter(), o->who(), o->dry_run);
      if (o->json) {
        out << to_json(result).dump(2) << "\n";
      } else {
        out << (o->dry_run ? "would " : "") << action << " " << result.ids.size() << " DEAD " << to_string(kind)
            << " record(s)" << (result.limit_reached ? " (limit reached: run again for more)" : "") << "\n";
        for (const auto id : result.ids) out << "  " << id << "\n";
      }
      return 0;
    });
    add_filter(command, *o);
    command.add_flag("--all", o->all, "allow running without any other filter");
    command.add_option("--actor", o->actor, "who does it, recorded on each row (default cli:$USER)")->type_name("NAME");
    command.add_flag("--dry-run", o->dry_run, "report the ids that would change; change nothing");
    add_kind_and_json(command, *o);
  }
}

void add_purge(CommandTree& tree, std::ostream& out) {
  struct PurgeFlags {
    long long inbox_days = PurgeOptions{}.inbox_retention.count() / 24;
    long long outbox_days = PurgeOptions{}.outbox_retention.count() / 24;
    std::size_t batch_size = PurgeOptions{}.batch_size;
    bool dry_run = false;
    bool json = false;
  };
  auto o = std::make_shared<PurgeFlags>();
  CLI::App& purge_command =
      tree.add(tree.root(), "purge", "delete finished rows past retention, in bounded batches",
               [o, &out](const RuntimeConfig& config) {
                 const auto report = purge(*operator_pool(config), config.schema,
                                           {.inbox_retention = std::chrono::hours(24 * o->inbox_days),
                                            .outbox_retention = std::chrono::hours(24 * o->outbox_days),
                                            .batch_size = o->batch_size,
                                            .dry_run = o->dry_run});
                 out << (o->json ? to_json(report).dump(2) + "\n" : to_table(report));
                 return 0;
               });
  purge_command.add_option("--inbox-days", o->inbox_days, "COMPLETED receipts older than this are deleted (default 30)")
      ->type_name("N")
      ->check(kWholeNumber);
  purge_command.add_option("--outbox-days", o->outbox_days, "PUBLISHED events older than this are deleted (default 7)")
      ->type_name("N")
      ->check(kWholeNumber);
  purge_command.add_option("--batch-size", o->batch_size, "rows per DELETE (default 1000)")->type_name("N")->check(kWholeNumber);
  purge_command.add_flag("--dry-run", o->dry_run, "count what is past retention; delete nothing");
  purge_command.add_flag("--json", o->json, "machine-readable output");
}

}  // namespace

void add_operator_commands(CommandTree& tree, std::ostream& out) {
  add_status(tree, out);
  add_dead(tree, out);
  add_purge(tree, out);
}

}  // namespace boxcar::detail
