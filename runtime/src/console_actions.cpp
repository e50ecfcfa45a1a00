// The console's actions (console_actions.hpp), on the operator commands of boxcar::ops.
#include "console_actions.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/logging.hpp"
#include "boxcar/core/scope.hpp"
#include "boxcar/ops/console.hpp"
#include "boxcar/ops/operator.hpp"

namespace boxcar::detail {
namespace {

constexpr std::size_t kMaxActorLength = 64;

[[noreturn]] void invalid(const std::string& field, const std::string& why) {
  throw ConsoleRequestError(400, "ACTION_INVALID", field + ": " + why);
}

std::string string_field(const nlohmann::json& body, const char* name, bool required) {
  const auto found = body.find(name);
  if (found == body.end() || found->is_null()) {
    if (required) invalid(name, "is required");
    return {};
  }
  if (!found->is_string()) invalid(name, "must be a string");
  return found->get<std::string>();
}

// What an action names, parsed and checked before anything touches the database.
struct ActionPlan {
  std::string action;  // retry | discard | unblock
  RecordKind kind = RecordKind::Inbox;
  DeadFilter filter{};       // retry, discard
  UnblockRequest unblock{};  // unblock
  std::string target;        // as recorded: the group, "id N", "key K (consumer, scope)"
};

ActionPlan plan(const nlohmann::json& body) {
  if (!body.is_object()) invalid("body", "must be a JSON object");
  ActionPlan p;
  p.action = string_field(body, "action", true);
  if (p.action != "retry" && p.action != "discard" && p.action != "unblock")
    invalid("action", "must be retry, discard or unblock");
  const std::string kind = string_field(body, "kind", false);
  if (!kind.empty() && kind != "inbox" && kind != "outbox") invalid("kind", "must be inbox or outbox");
  p.kind = kind == "outbox" ? RecordKind::Outbox : RecordKind::Inbox;

  if (p.action == "unblock") {
    if (p.kind != RecordKind::Inbox) invalid("kind", "only inbox receipts hold ordering keys");
    p.unblock.key = string_field(body, "key", true);
    if (p.unblock.key.empty()) invalid("key", "must not be empty");
    p.unblock.consumer = string_field(body, "consumer", false);
    const std::string scope = string_field(body, "scope", false);
    if (!scope.empty()) {
      p.unblock.scope = parse_scope(scope);
      if (!p.unblock.scope) invalid("scope", "must be global or tenant:ID");
    }
    p.target = "key " + p.unblock.key + (p.unblock.consumer.empty() ? "" : " of " + p.unblock.consumer) +
               (scope.empty() ? "" : " in " + scope);
    return p;
  }
  const std::string group = string_field(body, "group", false);
  const auto id = body.find("id");
  const bool has_id = id != body.end() && !id->is_null();
  if (group.empty() == !has_id) invalid("group", "name either a group or an id");
  p.filter.limit = kMaxActionRows;
  if (has_id) {
    if (!id->is_number_integer() || id->get<std::int64_t>() <= 0) invalid("id", "must be a positive integer");
    p.filter.ids = {id->get<std::int64_t>()};
    p.target = "id " + std::to_string(id->get<std::int64_t>());
  } else {
    p.filter.group = group;
    p.target = "group " + group;
  }
  return p;
}

// The rows the action would change now.
std::vector<std::int64_t> count(const ConsoleSources& s, const ActionPlan& p, const std::string& actor) {
  if (p.action == "unblock") {
    UnblockRequest request = p.unblock;
    request.actor = actor;
    request.dry_run = true;
    std::vector<std::int64_t> ids;
    for (const auto& released : unblock_key(*s.writes, s.schema, request)) ids.push_back(released.receipt_id);
    return ids;
  }
  const auto result = p.action == "retry" ? dead_retry(*s.writes, s.schema, p.kind, p.filter, actor, true)
                                          : dead_discard(*s.writes, s.schema, p.kind, p.filter, actor, true);
  return result.ids;
}

}  // namespace

nlohmann::json preview_console_action(const ConsoleSources& sources, const nlohmann::json& body) {
  const ActionPlan p = plan(body);
  const auto ids = count(sources, p, "console:preview");
  return {{"action", p.action},
          {"kind", to_string(p.kind)},
          {"target", p.target},
          {"rows", ids.size()},
          {"limit_reached", ids.size() >= kMaxActionRows}};
}

nlohmann::json run_console_action(const ConsoleSources& sources, const nlohmann::json& body) {
  const ActionPlan p = plan(body);
  const std::string name = string_field(body, "actor", true);
  if (name.empty() || name.size() > kMaxActorLength ||
      std::any_of(name.begin(), name.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    invalid("actor", "must be 1 to " + std::to_string(kMaxActorLength) + " printable characters");
  const std::string actor = "console:" + name;
  const auto confirm = body.find("confirm_rows");
  if (confirm == body.end() || !confirm->is_number_integer() || confirm->get<std::int64_t>() < 0)
    invalid("confirm_rows", "must be the row count the preview showed");
  const auto confirmed = static_cast<std::size_t>(confirm->get<std::int64_t>());

  // The operator confirmed a number: act only while it still holds, and on at most that
  // many rows (rows that die meanwhile wait for the next confirmation).
  const auto now = count(sources, p, actor);
  if (now.size() != confirmed)
    throw ConsoleRequestError(409, "CONFIRMATION_MISMATCH",
                              "the action would now change " + std::to_string(now.size()) + " rows, not " +
                                  std::to_string(confirmed) + ": preview it again");
  std::vector<std::int64_t> changed;
  if (confirmed > 0) {
    if (p.action == "unblock") {
      UnblockRequest request = p.unblock;
      request.actor = actor;
      for (const auto& released : unblock_key(*sources.writes, sources.schema, request))
        changed.push_back(released.receipt_id);
    } else {
      DeadFilter filter = p.filter;
      filter.limit = confirmed;
      changed = (p.action == "retry" ? dead_retry(*sources.writes, sources.schema, p.kind, filter, actor)
                                     : dead_discard(*sources.writes, sources.schema, p.kind, filter, actor))
                    .ids;
    }
    record_operator_action(*sources.writes, sources.schema, actor, p.action, p.kind, p.target,
                           static_cast<std::int64_t>(changed.size()));
  }
  // Fields, escaped by log_event: the key and the actor are whatever a request sent.
  log_event(*logger("operator"), LogLevel::Info, "console action",
            {{"action", p.action},
             {"kind", to_string(p.kind)},
             {"target", p.target},
             {"rows", std::to_string(changed.size())},
             {"actor", actor}});
  return {{"action", p.action},
          {"kind", to_string(p.kind)},
          {"target", p.target},
          {"rows", changed.size()},
          {"ids", changed}};
}

}  // namespace boxcar::detail
