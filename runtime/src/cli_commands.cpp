// dead / purge on the command line (status: cli_status_command.cpp): options and output; the work is done by
// operator.hpp. docs/operator.md describes every option.
#include "cli_commands.hpp"

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <ostream>

#include "boxcar/ops/operator.hpp"
#include "boxcar/core/connection_pool.hpp"

namespace boxcar::detail {
namespace {

std::shared_ptr<ConnectionPool> operator_pool(const RuntimeConfig& config) {
  PoolOptions options = config.pool;
  options.size = 2;
  return ConnectionPool::create(std::move(options));
}

// For commands whose work lives in a session (purge: SET ROLE, DETACH ... CONCURRENTLY):
// on database.session_url, never through a transaction pooler.
std::shared_ptr<ConnectionPool> session_operator_pool(const RuntimeConfig& config) {
  PoolOptions options = config.pool;
  if (!options.session_url.empty()) options.url = options.session_url;
  options.size = 1;
  return ConnectionPool::create(std::move(options));
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
      const bool ok =
          !value.empty() && value.size() <= 15 && value.find_first_not_of("0123456789") == std::string::npos;
      return ok ? std::string() : "expects a whole number, got '" + value + "'";
    },
    "");

std::string default_actor() {
  const char* user = std::getenv("USER");
  return std::string("cli:") + (user && *user ? user : "unknown");
}

struct DeadOptions {
  std::vector<std::int64_t> ids;
  std::string consumer, event_type, error, older_than, failure_group;
  std::size_t limit = DeadFilter{}.limit;
  bool all = false;
  std::string kind = "inbox";
  std::string actor = default_actor();  // an explicit empty --actor is refused (DEAD_ACTOR_REQUIRED)
  bool group = false;
  bool dry_run = false;
  bool json = false;
  std::int64_t id = 0;  // dead show ID

  DeadFilter filter() const {
    return {.ids = ids,
            .consumer = consumer,
            .event_type = event_type,
            .error_contains = error,
            .older_than = older_than.empty() ? std::nullopt : parse_duration(older_than),
            .group = failure_group,
            .limit = limit,
            .all = all};
  }
  RecordKind record_kind() const { return parse_record_kind(kind); }
};

void add_kind_and_json(CLI::App& command, DeadOptions& o) {
  command.add_option("--kind", o.kind, "inbox (default) or outbox")
      ->type_name("KIND")
      ->check(CLI::IsMember({"inbox", "outbox"}));
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

// Each command's options live in a shared struct that its runner reads once CLI11 has
// filled it in.

void add_dead_list(CommandTree& tree, CLI::App& dead, std::ostream& out) {
  auto o = std::make_shared<DeadOptions>();
  const auto run = [o, &out](const RuntimeConfig& config) {
    auto pool = operator_pool(config);
    if (o->group) {
      const auto groups = dead_groups(*pool, config.schema, o->record_kind(), o->filter());
      out << (o->json ? dead_list_document(o->record_kind(), groups).dump(2) + "\n" : to_table(groups));
    } else {
      const auto records = dead_list(*pool, config.schema, o->record_kind(), o->filter());
      out << (o->json ? dead_list_document(o->record_kind(), records).dump(2) + "\n" : to_table(records));
    }
    return ExitCode::Ok;
  };
  CLI::App& command = tree.add(dead, "list", "the DEAD records that match, oldest death first", run);
  add_filter(command, *o);
  command.add_flag("--group", o->group, "group them by failure fingerprint");
  add_kind_and_json(command, *o);
}

void add_dead_show(CommandTree& tree, CLI::App& dead, std::ostream& out) {
  auto o = std::make_shared<DeadOptions>();
  const auto run = [o, &out](const RuntimeConfig& config) {
    const auto record = dead_show(*operator_pool(config), config.schema, o->record_kind(), o->id);
    out << (o->json ? to_json(record).dump(2) + "\n" : to_table(record));
    return ExitCode::Ok;
  };
  CLI::App& command = tree.add(dead, "show", "one DEAD record with its payload and metadata", run);
  command.add_option("ID", o->id, "the row id")->required()->check(kWholeNumber);
  add_kind_and_json(command, *o);
}

// `dead retry` and `dead discard`: the same selection, a different action.
void add_dead_action(CommandTree& tree, CLI::App& dead, const std::string& action, const std::string& description,
                     std::ostream& out) {
  auto o = std::make_shared<DeadOptions>();
  const auto run = [o, action, &out](const RuntimeConfig& config) {
    auto pool = operator_pool(config);
    const RecordKind kind = o->record_kind();
    const auto result = action == "retry" ? dead_retry(*pool, config.schema, kind, o->filter(), o->actor, o->dry_run)
                                          : dead_discard(*pool, config.schema, kind, o->filter(), o->actor, o->dry_run);
    if (o->json) {
      out << to_json(result).dump(2) << "\n";
    } else {
      out << (o->dry_run ? "would " : "") << action << " " << result.ids.size() << " DEAD " << to_string(kind)
          << " record(s)" << (result.limit_reached ? " (limit reached: run again for more)" : "") << "\n";
      for (const auto id : result.ids) out << "  " << id << "\n";
    }
    return ExitCode::Ok;
  };
  CLI::App& command = tree.add(dead, action, description, run);
  add_filter(command, *o);
  command.add_flag("--all", o->all, "allow running without any other filter");
  command.add_option("--actor", o->actor, "who does it, recorded on each row (default cli:$USER)")->type_name("NAME");
  command.add_flag("--dry-run", o->dry_run, "report the ids that would change; change nothing");
  add_kind_and_json(command, *o);
}

// Exit 1 when nothing was released: a script that unblocks a key must learn that it is
// still held (by a head that is still retried, or by nothing at all). A key is one scope's
// (docs/ordering.md): without --scope, a key blocked in several scopes is refused
// (UNBLOCK_SCOPE_REQUIRED, exit 1) unless --every-scope says to release them all.
void add_dead_unblock(CommandTree& tree, CLI::App& dead, std::ostream& out) {
  struct UnblockFlags {
    std::string key;
    std::string consumer;
    std::string scope;
    std::string actor = default_actor();  // an explicit empty --actor is refused (DEAD_ACTOR_REQUIRED)
    bool every_scope = false;
    bool json = false;
  };
  auto o = std::make_shared<UnblockFlags>();
  const auto run = [o, &out](const RuntimeConfig& config) {
    // --scope was checked when the command line was parsed.
    const UnblockRequest request{.key = o->key,
                                 .consumer = o->consumer,
                                 .scope = o->scope.empty() ? std::nullopt : parse_scope(o->scope),
                                 .every_scope = o->every_scope,
                                 .actor = o->actor};
    auto pool = operator_pool(config);
    const auto released = unblock_key(*pool, config.schema, request);
    if (o->json) {
      auto rows = nlohmann::json::array();
      for (const auto& r : released)
        rows.push_back({{"consumer", r.consumer}, {"scope", to_string(r.scope)}, {"receipt_id", r.receipt_id}});
      out << nlohmann::json{{"key", o->key}, {"released", rows}}.dump(2) << "\n";
      return released.empty() ? ExitCode::Failure : ExitCode::Ok;
    }
    for (const auto& r : released)
      out << "released key '" << o->key << "' of " << r.consumer << " in scope " << to_string(r.scope)
          << " from DEAD receipt " << r.receipt_id << " (it stays DEAD: boxcar dead retry --id " << r.receipt_id
          << " replays it)\n";
    if (!released.empty()) return ExitCode::Ok;
    bool held = false;
    for (const auto& k : blocked_keys(*pool, config.schema, 1000)) {
      if (k.key != o->key || (!o->consumer.empty() && k.consumer != o->consumer) ||
          (request.scope && k.scope != *request.scope))
        continue;
      held = true;
      out << "key '" << o->key << "' of " << k.consumer << " in scope " << to_string(k.scope) << " is held by receipt "
          << k.head_id << ", which is " << k.head_status << " after " << k.head_attempts
          << " attempt(s): only a DEAD head can be released\n";
    }
    if (!held) out << "no DEAD receipt blocks key '" << o->key << "'\n";
    return ExitCode::Failure;
  };
  CLI::App& command =
      tree.add(dead, "unblock", "release an ordering key from the DEAD receipt that blocks it (docs/ordering.md)", run);
  command.add_option("KEY", o->key, "the ordering key")->required();
  command.add_option("--consumer", o->consumer, "only this consumer's key (default: every consumer's)")
      ->type_name("NAME");
  command
      .add_option("--scope", o->scope,
                  "only this scope's key: global or tenant:ID (default: the one scope that has the key blocked)")
      ->type_name("SCOPE")
      ->check([](const std::string& value) {
        return parse_scope(value) ? std::string() : "expects global or tenant:ID, got '" + value + "'";
      });
  command.add_flag("--every-scope", o->every_scope, "release the key in every scope that has it blocked");
  command.add_option("--actor", o->actor, "who releases it, recorded on the receipt (default cli:$USER)")
      ->type_name("NAME");
  command.add_flag("--json", o->json, "print the released receipts as JSON");
}

void add_dead(CommandTree& tree, std::ostream& out) {
  CLI::App& dead = tree.add(tree.root(), "dead", "operator recovery of DEAD records (docs/operator.md)");
  add_dead_list(tree, dead, out);
  add_dead_show(tree, dead, out);
  add_dead_action(tree, dead, "retry", "replay the matching DEAD records", out);
  add_dead_action(tree, dead, "discard", "mark the matching DEAD records as dealt with", out);
  add_dead_unblock(tree, dead, out);
}

void add_purge(CommandTree& tree, std::ostream& out) {
  struct PurgeFlags {
    long long inbox_days = PurgeOptions{}.inbox_retention.count() / 24;
    long long outbox_days = PurgeOptions{}.outbox_retention.count() / 24;
    std::size_t batch_size = PurgeOptions{}.batch_size;
    std::optional<long long> horizon_days;
    long long dead_days = 0;
    bool dry_run = false;
    bool json = false;
  };
  auto o = std::make_shared<PurgeFlags>();
  const auto run = [o, &out](const RuntimeConfig& config) {
    const PurgeOptions options{.inbox_retention = std::chrono::hours(24 * o->inbox_days),
                               .outbox_retention = std::chrono::hours(24 * o->outbox_days),
                               .redelivery_horizon = o->horizon_days ? std::chrono::hours(24 * *o->horizon_days)
                                                                     : config.janitor.retention.redelivery_horizon,
                               .dead_retention = std::chrono::hours(24 * o->dead_days),
                               .batch_size = o->batch_size,
                               .partitions_ahead = config.janitor.retention.partitions_ahead,
                               .dry_run = o->dry_run};
    validate_retention(options, "--inbox-days",
                       o->horizon_days ? "--redelivery-horizon-days" : "retention.redelivery_horizon_hours",
                       "--dead-days");
    const auto report = purge(*session_operator_pool(config), config.schema, options);
    out << (o->json ? to_json(report).dump(2) + "\n" : to_table(report));
    return ExitCode::Ok;
  };
  CLI::App& command = tree.add(tree.root(), "purge", "delete finished rows past retention, in bounded batches", run);
  command.add_option("--inbox-days", o->inbox_days, "delete COMPLETED receipts older than this (default 30)")
      ->type_name("N")
      ->check(kWholeNumber);
  command
      .add_option("--redelivery-horizon-days", o->horizon_days,
                  "refuse an --inbox-days shorter than this (default: retention.redelivery_horizon_hours)")
      ->type_name("N")
      ->check(kWholeNumber);
  command
      .add_option("--dead-days", o->dead_days,
                  "also delete DEAD receipts unchanged this long, except a DEAD head that blocks its ordering key "
                  "(default 0: keep them; at least --redelivery-horizon-days)")
      ->type_name("N")
      ->check(kWholeNumber);
  command
      .add_option("--outbox-days", o->outbox_days,
                  "retire outbox partitions whose events are all finished and older than this (default 7)")
      ->type_name("N")
      ->check(kWholeNumber);
  command.add_option("--batch-size", o->batch_size, "rows per DELETE (default 1000)")
      ->type_name("N")
      ->check(kWholeNumber);
  command.add_flag("--dry-run", o->dry_run, "count what is past retention; delete nothing");
  command.add_flag("--json", o->json, "machine-readable output");
}

}  // namespace

void add_operator_commands(CommandTree& tree, std::ostream& out) {
  add_dead(tree, out);
  add_purge(tree, out);
}

}  // namespace boxcar::detail
