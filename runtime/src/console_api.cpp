// The console's routes (console_api.hpp): the read endpoints through the console role's
// pool, the guarded actions through the operator role's, the embedded page.
#include "console_api.hpp"

#include <charconv>
#include <optional>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/redaction.hpp"
#include "boxcar/ops/console.hpp"
#include "boxcar/ops/database_health.hpp"
#include "boxcar/ops/operator.hpp"
#include "console_actions.hpp"
#include "console_assets.hpp"
#include "console_auth.hpp"

namespace boxcar::detail {
namespace {

constexpr std::string_view kApi = "/api/v1/";
constexpr std::size_t kDefaultPage = 50;

ConsoleResponse json_response(int status, const nlohmann::json& body) {
  // Replace invalid UTF-8 (error texts are whatever a handler threw) instead of failing.
  return {status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n"};
}

ConsoleResponse error_response(int status, const std::string& code, const std::string& message) {
  return json_response(status, {{"error", {{"code", code}, {"message", message}}}});
}

std::int64_t integer_parameter(const ConsoleRequest& r, const std::string& name, std::int64_t fallback) {
  const auto found = r.query.find(name);
  if (found == r.query.end() || found->second.empty()) return fallback;
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(found->second.data(), found->second.data() + found->second.size(), value);
  if (error != std::errc() || end != found->second.data() + found->second.size())
    throw ConsoleRequestError(400, "PARAMETER_INVALID", name + " must be a whole number");
  return value;
}

RecordKind kind_parameter(const ConsoleRequest& r) {
  const auto found = r.query.find("kind");
  if (found == r.query.end() || found->second.empty()) return RecordKind::Inbox;
  try {
    return parse_record_kind(found->second);
  } catch (const OperatorError&) {
    throw ConsoleRequestError(400, "PARAMETER_INVALID", "kind must be inbox or outbox");
  }
}

bool is_admin(const ConsoleContext& c, const ConsoleRequest& r) {
  return !c.admin_token.empty() && constant_time_equals(bearer_token(r.header("Authorization")), c.admin_token);
}

// A write is allowed only with the admin token, the CSRF token and a same-origin Origin.
void guard_write(const ConsoleContext& c, const ConsoleRequest& r) {
  if (c.admin_token.empty())
    throw ConsoleRequestError(403, "ACTIONS_DISABLED",
                              "this console is read-only: no console.admin_token is configured");
  if (!same_origin(r.header("Origin"), r.header("Host")))
    throw ConsoleRequestError(403, "ORIGIN_REFUSED", "a write must come from the console's own page (Origin)");
  if (!is_admin(c, r)) throw ConsoleRequestError(401, "ADMIN_TOKEN_REQUIRED", "actions need the admin token");
  const char* csrf = r.header("X-CSRF-Token");
  if (!constant_time_equals(csrf ? csrf : "", c.csrf_token))
    throw ConsoleRequestError(403, "CSRF_TOKEN_REQUIRED", "actions need the CSRF token of /api/v1/session");
}

nlohmann::json parse_body(const ConsoleRequest& r) {
  auto body = nlohmann::json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object())
    throw ConsoleRequestError(400, "ACTION_INVALID", "body: must be a JSON object");
  return body;
}

nlohmann::json session(const ConsoleContext& c, const ConsoleRequest& r) {
  return {{"schema", c.sources.schema},
          {"admin", is_admin(c, r)},
          {"actions_enabled", !c.admin_token.empty()},
          {"csrf_token", c.csrf_token},
          {"refresh_ms", c.refresh.count()}};
}

nlohmann::json record(const ConsoleContext& c, const ConsoleRequest& r, std::int64_t id) {
  const RecordKind kind = kind_parameter(r);
  nlohmann::json out = console_record(*c.sources.reads, c.sources.schema, kind, id);
  const bool admin = is_admin(c, r);
  if (admin) {
    // The content, read through the operator role: the console role cannot see it.
    const DeadRecord content = dead_show(*c.sources.writes, c.sources.schema, kind, id);
    out["payload"] = redact_content(content.payload);
    out["metadata"] = redact_content(content.metadata);
  }
  out["content_shown"] = admin;
  return out;
}

nlohmann::json group_page(const ConsoleContext& c, const ConsoleRequest& r, const std::string& group) {
  const RecordKind kind = kind_parameter(r);
  const auto limit = integer_parameter(r, "limit", kDefaultPage);
  if (limit <= 0) throw ConsoleRequestError(400, "PARAMETER_INVALID", "limit must be at least 1");
  std::optional<GroupCursor> after;
  if (r.query.contains("after_id"))
    after = GroupCursor{.consumer = r.query.contains("after_consumer") ? r.query.at("after_consumer") : "",
                        .updated_at_us = integer_parameter(r, "after_us", 0),
                        .id = integer_parameter(r, "after_id", 0)};
  return console_group_page(*c.sources.reads, c.sources.schema, kind, group, after, static_cast<std::size_t>(limit));
}

ConsoleResponse api(const ConsoleContext& c, const ConsoleRequest& r) {
  const std::string route = r.path.substr(kApi.size());
  const auto& s = c.sources;
  if (r.method == "POST") {
    if (route != "actions/preview" && route != "actions/run")
      return error_response(404, "NOT_FOUND", "no such endpoint");
    guard_write(c, r);
    const auto body = parse_body(r);
    return json_response(200,
                         route == "actions/preview" ? preview_console_action(s, body) : run_console_action(s, body));
  }
  if (r.method != "GET" && r.method != "HEAD") return error_response(405, "METHOD_NOT_ALLOWED", "GET or POST");
  if (route == "session") return json_response(200, session(c, r));
  if (route == "overview") return json_response(200, console_overview(*s.reads, s.schema, s.consumers));
  if (route == "dead/groups") return json_response(200, console_dead_groups(*s.reads, s.schema, kind_parameter(r)));
  if (route.starts_with("dead/groups/")) return json_response(200, group_page(c, r, route.substr(12)));
  if (route.starts_with("dead/records/")) {
    const std::string digits = route.substr(13);
    std::int64_t id = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), id);
    if (digits.empty() || error != std::errc() || end != digits.data() + digits.size())
      return error_response(400, "PARAMETER_INVALID", "the record id must be a whole number");
    return json_response(200, record(c, r, id));
  }
  if (route == "blocked-keys") return json_response(200, console_blocked_keys(*s.reads, s.schema));
  if (route == "health") return json_response(200, database_health_document(*s.reads, s.schema));
  if (route == "actions") return json_response(200, console_actions(*s.reads, s.schema));
  return error_response(404, "NOT_FOUND", "no such endpoint");
}

}  // namespace

ConsoleResponse handle_console_request(const ConsoleContext& context, const ConsoleRequest& request) {
  try {
    if (request.path.starts_with(kApi)) return api(context, request);
    if (request.method != "GET" && request.method != "HEAD")
      return {405, "text/plain; charset=utf-8", "method not allowed\n"};
    const std::string path = request.path == "/" ? "/index.html" : request.path;
    for (const auto& asset : console_assets())
      if (asset.path == path) return {200, std::string(asset.content_type), std::string(asset.body)};
    return {404, "text/plain; charset=utf-8", "not found\n"};
  } catch (const ConsoleRequestError& e) {
    return error_response(e.status(), e.code(), e.what());
  } catch (const OperatorError& e) {
    return error_response(e.code() == "DEAD_RECORD_NOT_FOUND" ? 404 : 400, e.code(), e.what());
  } catch (const ConfigError& e) {
    return error_response(400, e.code(), e.what());
  } catch (const DatabaseError& e) {
    // Fields, escaped by log_event: the path is whatever the request sent.
    log_event(*logger("runtime"), LogLevel::Warn, "console request failed",
              {{"method", request.method}, {"path", request.path}, {"error", redact_secrets(e.what())}});
    return error_response(503, e.code(), redact_secrets(e.what()));
  } catch (const std::exception& e) {
    log_event(*logger("runtime"), LogLevel::Error, "console request failed",
              {{"method", request.method}, {"path", request.path}, {"error", redact_secrets(e.what())}});
    return error_response(500, "INTERNAL", "internal error");
  }
}

}  // namespace boxcar::detail
