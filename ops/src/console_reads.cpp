// The operator console's reads and its action record (console.hpp; SQL in
// console_queries.hpp). The counts come from the fleet's stored backlog figures, written
// by the elected backlog collector in the format of backlog_collector.cpp's
// inbox_figures() and outbox_figures(): {"consumers": {NAME: {"counts": {STATUS: n},
// "estimated": [STATUS...], "oldest_due_age": s, "blocked_keys": n, ...}}} and
// {"counts": {STATUS: n}, "oldest_age": s}.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "boxcar/core/pg_array.hpp"
#include "boxcar/core/redaction.hpp"
#include "boxcar/ops/console.hpp"
#include "console_queries.hpp"
#include "operator_support.hpp"

namespace boxcar {
namespace {

namespace sql = detail::console_sql;
using detail::from_micros;
using detail::optional_time;
using detail::time_json;

constexpr int kOverviewFormatVersion = 1;
constexpr std::string_view kInboxStatuses[] = {"PENDING", "RETRYABLE", "PROCESSING", "WAITING", "DEAD"};
constexpr std::string_view kOutboxStatuses[] = {"PENDING", "WAITING", "PUBLISHING", "RETRYABLE", "DEAD"};

std::string text(const pqxx::row& row, const char* column) { return row[column].as<std::string>(std::string{}); }

std::string lower(std::string value) {
  for (char& c : value) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return value;
}

nlohmann::json parse_json(const pqxx::field& field) {
  if (field.is_null()) return nullptr;
  return nlohmann::json::parse(field.c_str(), nullptr, /*allow_exceptions=*/false);
}

std::string scope_text(const std::string& kind, const std::string& id) {
  return kind == "tenant" ? "tenant:" + id : kind;
}

struct StoredFigures {
  nlohmann::json figures = nlohmann::json::object();
  nlohmann::json about;  // {"known", "age_seconds", "collected_by"}
};

StoredFigures read_figures(pqxx::transaction_base& tx, const std::string& statement, const char* section) {
  StoredFigures out;
  const auto rows = tx.exec_params(statement, section);
  const bool known = !rows.empty() && rows[0]["computed"].as<bool>();
  if (known) {
    out.figures = parse_json(rows[0]["figures"]);
    if (!out.figures.is_object()) out.figures = nlohmann::json::object();
  }
  out.about = {{"known", known},
               {"age_seconds", known ? rows[0]["age_seconds"].as<double>() : 0.0},
               {"collected_by", known ? rows[0]["collected_by"].as<std::string>() : std::string()}};
  return out;
}

double number_at(const nlohmann::json& object, std::string_view key) {
  const auto found = object.find(key);
  return found != object.end() && found->is_number() ? found->get<double>() : 0.0;
}

nlohmann::json group_json(const pqxx::row& row) {
  const auto strings = [&](const char* column) {
    std::vector<std::string> out;
    const auto array = parse_json(row[column]);
    if (array.is_array())
      for (const auto& item : array)
        if (item.is_string()) out.push_back(item.get<std::string>());
    std::sort(out.begin(), out.end());
    return out;
  };
  return {{"group", text(row, "failure_group")},
          {"failure", text(row, "failure")},
          {"count", row["records"].as<std::int64_t>()},
          {"first_seen", time_json(from_micros(row["first_seen_us"].as<std::int64_t>()))},
          {"last_seen", time_json(from_micros(row["last_seen_us"].as<std::int64_t>()))},
          {"consumers", strings("consumers")},
          {"event_types", strings("event_types")},
          {"topics", strings("topics")}};
}

bool is_group_key(const std::string& group) {
  return group.size() == 12 && std::all_of(group.begin(), group.end(),
                                           [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Member names whose value the logs would never show (docs/security.md, section 6).
bool secret_member(const std::string& name) {
  const std::string n = lower(name);
  for (const char* word : {"password", "passwd", "secret", "token", "authorization", "api_key", "apikey", "credential",
                           "private_key", "cookie"})
    if (n.find(word) != std::string::npos) return true;
  return false;
}

}  // namespace

nlohmann::json console_overview(ConnectionPool& pool, const std::string& schema,
                                const std::vector<std::string>& declared_consumers, const ConsoleLimits& limits) {
  const std::string figures_sql = detail::operator_statement(sql::kBacklogFigures, schema);
  const std::string rates_sql = detail::operator_statement(sql::kCompletionRates, schema);
  const std::string delivery_sql = detail::operator_statement(sql::kDeliveryRate, schema);
  const std::string errors_sql = detail::operator_statement(sql::kRecentOutboxErrors, schema);
  const std::string tenants_sql = detail::operator_statement(sql::kTopTenants, schema);
  const double window = static_cast<double>(limits.rate_window.count());

  return detail::with_operator_connection(pool, "console overview", false, [&](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    const StoredFigures inbox = read_figures(tx, figures_sql, "inbox");
    const StoredFigures outbox = read_figures(tx, figures_sql, "outbox");

    // Declared consumers first, in their order, then the others by name.
    std::vector<std::string> names = declared_consumers;
    std::set<std::string> seen(names.begin(), names.end());
    std::set<std::string> others;
    const nlohmann::json stored_consumers = inbox.figures.value("consumers", nlohmann::json::object());
    for (const auto& [name, entry] : stored_consumers.items())
      if (!seen.contains(name)) others.insert(name);

    std::map<std::string, std::int64_t> completed;
    std::int64_t completed_seen = 0;
    for (const auto& row : tx.exec_params(rates_sql, window, limits.rate_cap)) {
      const auto name = row["consumer"].as<std::string>();
      completed[name] = row["completed"].as<std::int64_t>();
      completed_seen += completed[name];
      if (!seen.contains(name)) others.insert(name);
    }
    names.insert(names.end(), others.begin(), others.end());
    const bool rate_capped = completed_seen >= limits.rate_cap;

    auto consumers = nlohmann::json::array();
    nlohmann::json totals = {{"oldest_due_age_seconds", 0.0}, {"completed_in_window", 0}};
    for (const auto status : kInboxStatuses) totals[lower(std::string(status))] = 0;
    std::vector<std::pair<double, std::string>> by_due;
    for (const auto& name : names) {
      const nlohmann::json entry = stored_consumers.value(name, nlohmann::json::object());
      const nlohmann::json counts = entry.value("counts", nlohmann::json::object());
      nlohmann::json out = {{"consumer", name},
                            {"declared", std::find(declared_consumers.begin(), declared_consumers.end(), name) !=
                                             declared_consumers.end()}};
      for (const auto status : kInboxStatuses) {
        const auto count = static_cast<std::int64_t>(number_at(counts, status));
        out[lower(std::string(status))] = count;
        totals[lower(std::string(status))] = totals[lower(std::string(status))].get<std::int64_t>() + count;
      }
      std::vector<std::string> estimated;
      for (const auto& status : entry.value("estimated", nlohmann::json::array()))
        if (status.is_string()) estimated.push_back(lower(status.get<std::string>()));
      out["estimated"] = estimated;
      out["oldest_due_age_seconds"] = number_at(entry, "oldest_due_age");
      out["blocked_keys"] = static_cast<std::int64_t>(number_at(entry, "blocked_keys"));
      const std::int64_t done = completed.contains(name) ? completed[name] : 0;
      out["completed_in_window"] = done;
      out["completions_per_second"] = static_cast<double>(done) / window;
      totals["oldest_due_age_seconds"] =
          std::max(totals["oldest_due_age_seconds"].get<double>(), out["oldest_due_age_seconds"].get<double>());
      totals["completed_in_window"] = totals["completed_in_window"].get<std::int64_t>() + done;
      by_due.emplace_back(number_at(counts, "PENDING") + number_at(counts, "RETRYABLE"), name);
      consumers.push_back(std::move(out));
    }

    const nlohmann::json outbox_counts = outbox.figures.value("counts", nlohmann::json::object());
    nlohmann::json outbox_out = nlohmann::json::object();
    std::int64_t unpublished = 0;
    for (const auto status : kOutboxStatuses) {
      const auto count = static_cast<std::int64_t>(number_at(outbox_counts, status));
      outbox_out[lower(std::string(status))] = count;
      if (status != "DEAD") unpublished += count;
    }
    outbox_out["unpublished"] = unpublished;
    outbox_out["oldest_unpublished_age_seconds"] = number_at(outbox.figures, "oldest_age");
    const auto published = tx.exec_params(delivery_sql, window, limits.rate_cap).at(0)["published"].as<std::int64_t>();
    outbox_out["published_in_window"] = published;
    outbox_out["deliveries_per_second"] = static_cast<double>(published) / window;
    outbox_out["rate_capped"] = published >= limits.rate_cap;
    outbox_out["recent_errors"] = nlohmann::json::array();
    for (const auto& row : tx.exec_params(errors_sql, static_cast<long long>(limits.recent_errors)))
      outbox_out["recent_errors"].push_back({{"id", row["id"].as<std::int64_t>()},
                                             {"topic", text(row, "topic")},
                                             {"event_type", text(row, "event_type")},
                                             {"failure", text(row, "failure")},
                                             {"group", text(row, "failure_group")},
                                             {"at", time_json(from_micros(row["at_us"].as<std::int64_t>()))}});

    // The tenants of the consumers with the largest due backlog.
    std::stable_sort(by_due.begin(), by_due.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    std::vector<std::string> backlogged;
    for (const auto& [due, name] : by_due)
      if (due > 0 && backlogged.size() < limits.tenant_consumers) backlogged.push_back(name);
    auto tenants = nlohmann::json::array();
    if (!backlogged.empty())
      for (const auto& row : tx.exec_params(tenants_sql, pg_array(backlogged), limits.tenant_sample,
                                            static_cast<long long>(limits.top_tenants)))
        tenants.push_back({{"consumer", text(row, "consumer")},
                           {"scope", scope_text(text(row, "scope_kind"), text(row, "scope_id"))},
                           {"due", row["due"].as<std::int64_t>()}});
    tx.commit();

    return nlohmann::json{{"format_version", kOverviewFormatVersion},
                          {"schema", schema},
                          {"figures", {{"inbox", inbox.about}, {"outbox", outbox.about}}},
                          {"rate_window_seconds", window},
                          {"inbox", {{"consumers", consumers}, {"totals", totals}, {"rate_capped", rate_capped}}},
                          {"outbox", outbox_out},
                          {"top_tenants", {{"sample_per_consumer", limits.tenant_sample}, {"tenants", tenants}}}};
  });
}

nlohmann::json console_dead_groups(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                   const ConsoleLimits& limits) {
  const std::string statement =
      detail::operator_statement(kind == RecordKind::Inbox ? sql::kInboxGroups : sql::kOutboxGroups, schema);
  return detail::with_operator_connection(pool, "console dead groups", false, [&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    auto groups = nlohmann::json::array();
    for (const auto& row : tx.exec_params(statement, static_cast<long long>(limits.groups)))
      groups.push_back(group_json(row));
    return nlohmann::json{{"kind", to_string(kind)}, {"groups", groups}};
  });
}

nlohmann::json console_group_page(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                  const std::string& group, const std::optional<GroupCursor>& after, std::size_t limit,
                                  const ConsoleLimits& limits) {
  if (limit == 0 || limit > limits.max_page)
    throw OperatorError("DEAD_FILTER_INVALID", "limit must be between 1 and " + std::to_string(limits.max_page));
  if (!is_group_key(group))
    throw OperatorError("DEAD_FILTER_INVALID", "group must be 12 lower-case hex digits, as dead groups print it");
  const bool inbox = kind == RecordKind::Inbox;
  const std::string statement =
      detail::operator_statement(inbox ? sql::kInboxGroupPage : sql::kOutboxGroupPage, schema);
  return detail::with_operator_connection(pool, "console group page", false, [&](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    // The page must walk the DEAD index in order from the cursor and stop at its LIMIT (an
    // incremental sort puts the rows of one timestamp in id order). The group is an
    // expression the planner cannot estimate (it guesses 0.5% of the rows match, so a LIMIT
    // that is never reached), and it would rather read every DEAD row after the cursor,
    // with a bitmap scan or a full sort: the cost of a page would grow with the DEAD rows.
    // SET LOCAL: this page's transaction only.
    tx.exec(
        "SELECT pg_catalog.set_config('enable_bitmapscan', 'off', true), "
        "pg_catalog.set_config('enable_sort', 'off', true)");
    const auto size = static_cast<long long>(limit);
    std::optional<long long> at_us, id;
    std::optional<std::string> consumer;
    if (after) {
      at_us = after->updated_at_us;
      id = after->id;
      consumer = after->consumer;
    }
    const pqxx::result rows = inbox ? tx.exec_params(statement, group, consumer, at_us, id, size)
                                    : tx.exec_params(statement, group, at_us, id, size);
    auto records = nlohmann::json::array();
    for (const auto& row : rows) {
      nlohmann::json r = {{"id", row["id"].as<std::int64_t>()},
                          {"scope", scope_text(text(row, "scope_kind"), text(row, "scope_id"))},
                          {"event_type", text(row, "event_type")},
                          {"attempts", row["attempts"].as<int>()},
                          {"dead_reason", text(row, "dead_reason")},
                          {"last_error", text(row, "last_error")},
                          {"replay_count", row["replay_count"].as<int>()},
                          {"last_replayed_by", text(row, "last_replayed_by")},
                          {"last_replayed_at", time_json(optional_time(row["last_replayed_at_us"]))},
                          {"died_at", time_json(from_micros(row["updated_at_us"].as<std::int64_t>()))}};
      if (inbox) {
        r["consumer"] = text(row, "consumer");
        r["source"] = text(row, "source");
        r["message_id"] = text(row, "message_id");
        r["last_error_type"] = text(row, "last_error_type");
      } else {
        r["event_id"] = text(row, "event_id");
        r["topic"] = text(row, "topic");
        r["message_key"] = text(row, "message_key");
      }
      records.push_back(std::move(r));
    }
    nlohmann::json next = nullptr;
    if (rows.size() == limit) {
      const auto& last = rows[rows.size() - 1];
      next = {{"id", last["id"].as<std::int64_t>()}, {"updated_at_us", last["updated_at_us"].as<std::int64_t>()}};
      if (inbox) next["consumer"] = text(last, "consumer");
    }
    tx.commit();
    return nlohmann::json{{"kind", to_string(kind)}, {"group", group}, {"records", records}, {"next", next}};
  });
}

nlohmann::json console_record(ConnectionPool& pool, const std::string& schema, RecordKind kind, std::int64_t id) {
  const bool inbox = kind == RecordKind::Inbox;
  const std::string statement = detail::operator_statement(inbox ? sql::kInboxReceipt : sql::kOutboxEvent, schema);
  const auto audit = [](const pqxx::row& row, const char* at, const char* by) {
    return nlohmann::json{{"at", time_json(optional_time(row[at]))}, {"by", text(row, by)}};
  };
  auto found = detail::with_operator_connection(
      pool, "console record", false, [&](pqxx::connection& c) -> std::optional<nlohmann::json> {
        pqxx::nontransaction tx(c);
        const auto rows = tx.exec_params(statement, id);
        if (rows.empty()) return std::nullopt;
        const auto& row = rows[0];
        nlohmann::json r = {{"id", row["id"].as<std::int64_t>()},
                            {"kind", to_string(kind)},
                            {"scope", scope_text(text(row, "scope_kind"), text(row, "scope_id"))},
                            {"event_type", text(row, "event_type")},
                            {"schema_version", row["schema_version"].as<int>()},
                            {"attempts", row["attempts"].as<int>()},
                            {"dead_reason", text(row, "dead_reason")},
                            {"last_error", text(row, "last_error")},
                            {"failure", text(row, "failure")},
                            {"group", text(row, "failure_group")},
                            {"created_at", time_json(from_micros(row["created_at_us"].as<std::int64_t>()))},
                            {"died_at", time_json(from_micros(row["updated_at_us"].as<std::int64_t>()))},
                            {"replay_count", row["replay_count"].as<int>()},
                            {"last_replayed", audit(row, "last_replayed_at_us", "last_replayed_by")},
                            {"discarded", audit(row, "discarded_at_us", "discarded_by")}};
        if (inbox) {
          r["source"] = text(row, "source");
          r["consumer"] = text(row, "consumer");
          r["message_id"] = text(row, "message_id");
          r["last_error_type"] = text(row, "last_error_type");
          r["ordering_key"] = text(row, "ordering_key");
          r["key_released"] = audit(row, "key_released_at_us", "key_released_by");
        } else {
          r["event_id"] = text(row, "event_id");
          r["topic"] = text(row, "topic");
          r["message_key"] = text(row, "message_key");
        }
        return r;
      });
  if (!found)
    throw OperatorError("DEAD_RECORD_NOT_FOUND",
                        std::string("no DEAD ") + to_string(kind) + " record with id " + std::to_string(id));
  return std::move(*found);
}

nlohmann::json console_blocked_keys(ConnectionPool& pool, const std::string& schema, const ConsoleLimits& limits) {
  const std::string statement = detail::operator_statement(sql::kBlockedKeys, schema);
  return detail::with_operator_connection(pool, "console blocked keys", false, [&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    auto keys = nlohmann::json::array();
    for (const auto& row : tx.exec_params(statement, static_cast<long long>(limits.blocked_keys)))
      keys.push_back({{"consumer", text(row, "consumer")},
                      {"scope", scope_text(text(row, "scope_kind"), text(row, "scope_id"))},
                      {"key", text(row, "ordering_key")},
                      {"receipt_id", row["head_id"].as<std::int64_t>()},
                      {"status", text(row, "head_status")},
                      {"attempts", row["head_attempts"].as<int>()},
                      {"error_type", text(row, "head_error_type")},
                      {"error", text(row, "head_error")},
                      {"blocked_since", time_json(from_micros(row["blocked_since_us"].as<std::int64_t>()))},
                      {"blocked_seconds", static_cast<double>(row["blocked_ms"].as<std::int64_t>()) / 1000.0}});
    return nlohmann::json{{"keys", keys}};
  });
}

nlohmann::json console_actions(ConnectionPool& pool, const std::string& schema, const ConsoleLimits& limits) {
  const std::string statement = detail::operator_statement(sql::kRecentActions, schema);
  return detail::with_operator_connection(pool, "console actions", false, [&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    auto actions = nlohmann::json::array();
    for (const auto& row : tx.exec_params(statement, static_cast<long long>(limits.actions)))
      actions.push_back({{"id", row["id"].as<std::int64_t>()},
                         {"at", time_json(from_micros(row["acted_at_us"].as<std::int64_t>()))},
                         {"actor", text(row, "actor")},
                         {"action", text(row, "action")},
                         {"kind", text(row, "kind")},
                         {"target", text(row, "target")},
                         {"rows", row["row_count"].as<std::int64_t>()}});
    return nlohmann::json{{"actions", actions}};
  });
}

void record_operator_action(ConnectionPool& pool, const std::string& schema, const std::string& actor,
                            const std::string& action, RecordKind kind, const std::string& target, std::int64_t rows) {
  if (actor.empty()) throw OperatorError("DEAD_ACTOR_REQUIRED", "an operator action needs an actor");
  const std::string statement = detail::operator_statement(sql::kRecordAction, schema);
  detail::with_operator_connection(pool, "recording an operator action", true, [&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    tx.exec_params(statement, actor, action, to_string(kind), target, static_cast<long long>(rows));
    return 0;
  });
}

nlohmann::json redact_content(const nlohmann::json& content) {
  if (content.is_string()) return redact_secrets(content.get<std::string>());
  if (content.is_array()) {
    auto out = nlohmann::json::array();
    for (const auto& item : content) out.push_back(redact_content(item));
    return out;
  }
  if (content.is_object()) {
    auto out = nlohmann::json::object();
    for (const auto& [name, value] : content.items()) out[name] = secret_member(name) ? "***" : redact_content(value);
    return out;
  }
  return content;
}

}  // namespace boxcar
