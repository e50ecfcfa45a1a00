// `boxcar dead list|groups|show|retry|discard`: DEAD records an operator inspects,
// replays or discards (SQL in operator_queries.hpp, over the views of
// migrations/0004_operator_views.sql; rendering in operator_format.cpp).
#include <algorithm>
#include <limits>
#include <utility>

#include <spdlog/spdlog.h>

#include "boxcar/ops/dead_records.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/core/logging.hpp"
#include "operator_queries.hpp"
#include "operator_support.hpp"

namespace boxcar {
namespace {

using detail::from_micros;
using detail::optional_time;

// A text column that may be NULL (last_error, last_replayed_by, ...): NULL reads as "".
std::string text(const pqxx::row& row, const char* column) { return row[column].as<std::string>(std::string{}); }

nlohmann::json parse_json(const pqxx::field& field) {
  if (field.is_null()) return nullptr;
  // Stored values are valid JSON (jsonb, or canonical text written by the emitter); a
  // corrupt one should not hide the rest of the record from an operator.
  return nlohmann::json::parse(field.c_str(), nullptr, /*allow_exceptions=*/false);
}

std::vector<std::string> sorted_strings(const pqxx::field& field) {
  std::vector<std::string> out;
  const auto array = parse_json(field);
  if (!array.is_array()) return out;
  for (const auto& item : array)
    if (item.is_string()) out.push_back(item.get<std::string>());
  std::sort(out.begin(), out.end());
  return out;
}

// A row of a dead list or dead show statement; `detail` for show's content columns.
DeadRecord read_record(const pqxx::row& row, RecordKind kind, bool detail) {
  DeadRecord r;
  r.kind = kind;
  r.id = row["id"].as<std::int64_t>();
  if (kind == RecordKind::Inbox) {
    r.scope_kind = text(row, "scope_kind");
    r.scope_id = text(row, "scope_id");
    r.source = text(row, "source");
    r.consumer = text(row, "consumer");
    r.message_id = text(row, "message_id");
    r.last_error_type = text(row, "last_error_type");
  } else {
    r.scope_kind = text(row, "tenant_scope");
    r.scope_id = text(row, "tenant_id");
    r.event_id = text(row, "event_id");
    r.topic = text(row, "topic");
    r.message_key = text(row, "message_key");
  }
  r.event_type = text(row, "event_type");
  r.schema_version = row["schema_version"].as<int>();
  r.attempts = row["attempts"].as<int>();
  r.dead_reason = text(row, "dead_reason");
  r.last_error = text(row, "last_error");
  r.created_at = from_micros(row["created_at_us"].as<std::int64_t>());
  r.updated_at = from_micros(row["updated_at_us"].as<std::int64_t>());
  r.replay_count = row["replay_count"].as<int>();
  r.last_replayed_at = optional_time(row["last_replayed_at_us"]);
  r.last_replayed_by = text(row, "last_replayed_by");
  r.discarded_at = optional_time(row["discarded_at_us"]);
  r.discarded_by = text(row, "discarded_by");
  r.failure = text(row, "failure");
  r.group = text(row, "failure_group");
  if (detail) {
    if (kind == RecordKind::Inbox) r.content_fingerprint = text(row, "content_fingerprint");
    r.payload = parse_json(row["payload"]);
    r.metadata = parse_json(row["metadata"]);
  }
  return r;
}

// The $1..$7 values every filtering dead-record statement takes (operator_queries.hpp).
struct BoundFilter {
  std::string ids;
  std::string consumer;
  std::string event_type;
  std::string error_contains;
  long long older_than_seconds;
  std::string group;
  long long limit;
};

bool has_criterion(const DeadFilter& f) {
  return !f.ids.empty() || !f.consumer.empty() || !f.event_type.empty() || !f.error_contains.empty() ||
         f.older_than.has_value() || !f.group.empty();
}

BoundFilter bind(RecordKind kind, const DeadFilter& f) {
  if (f.limit == 0) throw OperatorError("DEAD_FILTER_INVALID", "limit must be at least 1");
  if (f.older_than && f.older_than->count() < 0)
    throw OperatorError("DEAD_FILTER_INVALID", "older_than must not be negative");
  if (kind == RecordKind::Outbox && !f.consumer.empty())
    throw OperatorError("DEAD_FILTER_INVALID", "outbox events have no consumer; filter by event type instead");
  std::string ids = "{";
  for (const auto id : f.ids) {
    if (ids.size() > 1) ids += ',';
    ids += std::to_string(id);
  }
  ids += '}';
  const auto limit = std::min<std::size_t>(f.limit, std::numeric_limits<long long>::max());
  return {std::move(ids),
          f.consumer,
          f.event_type,
          f.error_contains,
          f.older_than ? static_cast<long long>(f.older_than->count()) : -1LL,
          f.group,
          static_cast<long long>(limit)};
}

template <typename... Extra>
pqxx::result exec_filtered(pqxx::transaction_base& tx, const std::string& sql, const BoundFilter& b, Extra&&... extra) {
  return tx.exec_params(sql, b.ids, b.consumer, b.event_type, b.error_contains, b.older_than_seconds, b.group, b.limit,
                        std::forward<Extra>(extra)...);
}

std::string describe(const DeadFilter& f) {
  std::string out;
  const auto add = [&out](const std::string& key, const std::string& value) {
    if (!out.empty()) out += ' ';
    out += key + '=' + value;
  };
  if (!f.ids.empty()) {
    std::string ids;
    for (const auto id : f.ids) ids += (ids.empty() ? "" : ",") + std::to_string(id);
    add("ids", ids);
  }
  if (!f.consumer.empty()) add("consumer", f.consumer);
  if (!f.event_type.empty()) add("event_type", f.event_type);
  if (!f.error_contains.empty()) add("error_contains", '"' + f.error_contains + '"');
  if (f.older_than) add("older_than", std::to_string(f.older_than->count()) + "s");
  if (!f.group.empty()) add("group", f.group);
  if (f.all) add("all", "true");
  add("limit", std::to_string(f.limit));
  return out;
}

std::vector<std::int64_t> read_ids(const pqxx::result& rows) {
  std::vector<std::int64_t> ids;
  ids.reserve(rows.size());
  for (const auto& row : rows) ids.push_back(row["id"].as<std::int64_t>());
  std::sort(ids.begin(), ids.end());
  return ids;
}

const char* pick(RecordKind kind, const char* inbox_sql, const char* outbox_sql) {
  return kind == RecordKind::Inbox ? inbox_sql : outbox_sql;
}

ActionResult dead_action(ConnectionPool& pool, const std::string& schema, RecordKind kind, const DeadFilter& filter,
                         const std::string& actor, bool dry_run, bool retry) {
  namespace sql = detail::operator_sql;
  const char* action = retry ? "retry" : "discard";
  if (!has_criterion(filter) && !filter.all)
    throw OperatorError("DEAD_FILTER_REQUIRED",
                        std::string("dead ") + action +
                            " needs a filter (ids, consumer, event type, error text, age or group); "
                            "pass all = true to act on every DEAD record");
  if (actor.empty()) throw OperatorError("DEAD_ACTOR_REQUIRED", std::string("dead ") + action + " needs an actor");
  const BoundFilter bound = bind(kind, filter);
  // A dry run lists what the action would take now: the same filter, order and limit.
  const char* text = dry_run ? pick(kind, sql::kInboxDeadList, sql::kOutboxDeadList)
                     : retry ? pick(kind, sql::kInboxRetry, sql::kOutboxRetry)
                             : pick(kind, sql::kInboxDiscard, sql::kOutboxDiscard);
  const std::string statement_sql = detail::operator_statement(text, schema);
  const std::string channel =
      kind == RecordKind::Inbox ? Inbox::notify_channel(schema) : OutboxEmitter::notify_channel(schema);

  ActionResult result{.action = action, .kind = kind, .dry_run = dry_run};
  result.ids =
      detail::with_operator_connection(pool, std::string("dead ") + action, !dry_run, [&](pqxx::connection& c) {
        pqxx::nontransaction statement(c);
        const auto ids = dry_run ? read_ids(exec_filtered(statement, statement_sql, bound))
                                 : read_ids(exec_filtered(statement, statement_sql, bound, actor));
        if (retry && !dry_run && !ids.empty()) {
          // A hint only: workers and publishers poll, so a lost wake-up costs latency, and the
          // retry already committed (the pool re-checks a connection that broke here).
          try {
            statement.exec_params(sql::kNotify, channel);
          } catch (const std::exception& e) {
            logger("operator")->warn("dead retry: wake-up NOTIFY failed: {}", e.what());
          }
        }
        return ids;
      });
  result.limit_reached = result.ids.size() >= filter.limit;
  logger("operator")
      ->info("dead {} kind={} count={} actor={} dry_run={} filter: {}", action, to_string(kind), result.ids.size(),
             actor, dry_run, describe(filter));
  return result;
}

}  // namespace

const char* to_string(RecordKind kind) noexcept { return kind == RecordKind::Inbox ? "inbox" : "outbox"; }

RecordKind parse_record_kind(std::string_view text) {
  if (text == "inbox") return RecordKind::Inbox;
  if (text == "outbox") return RecordKind::Outbox;
  throw OperatorError("RECORD_KIND_INVALID",
                      "record kind must be 'inbox' or 'outbox', not '" + std::string(text) + "'");
}

std::vector<DeadRecord> dead_list(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                  const DeadFilter& filter) {
  namespace sql = detail::operator_sql;
  const BoundFilter bound = bind(kind, filter);
  const std::string statement_sql =
      detail::operator_statement(pick(kind, sql::kInboxDeadList, sql::kOutboxDeadList), schema);
  return detail::with_operator_connection(pool, "dead list", false, [&](pqxx::connection& c) {
    pqxx::nontransaction statement(c);
    std::vector<DeadRecord> records;
    for (const auto& row : exec_filtered(statement, statement_sql, bound))
      records.push_back(read_record(row, kind, false));
    return records;
  });
}

std::vector<DeadGroup> dead_groups(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                   const DeadFilter& filter) {
  namespace sql = detail::operator_sql;
  const BoundFilter bound = bind(kind, filter);
  const std::string statement_sql =
      detail::operator_statement(pick(kind, sql::kInboxDeadGroups, sql::kOutboxDeadGroups), schema);
  return detail::with_operator_connection(pool, "dead groups", false, [&](pqxx::connection& c) {
    pqxx::nontransaction statement(c);
    std::vector<DeadGroup> groups;
    for (const auto& row : exec_filtered(statement, statement_sql, bound)) {
      groups.push_back({.group = row["failure_group"].as<std::string>(),
                        .failure = row["failure"].as<std::string>(),
                        .count = row["records"].as<std::int64_t>(),
                        .first_seen = from_micros(row["first_seen_us"].as<std::int64_t>()),
                        .last_seen = from_micros(row["last_seen_us"].as<std::int64_t>()),
                        .consumers = sorted_strings(row["consumers"]),
                        .event_types = sorted_strings(row["event_types"]),
                        .topics = sorted_strings(row["topics"]),
                        .dead_reasons = sorted_strings(row["dead_reasons"])});
    }
    return groups;
  });
}

DeadRecord dead_show(ConnectionPool& pool, const std::string& schema, RecordKind kind, std::int64_t id) {
  namespace sql = detail::operator_sql;
  const std::string statement_sql =
      detail::operator_statement(pick(kind, sql::kInboxDeadShow, sql::kOutboxDeadShow), schema);
  auto record =
      detail::with_operator_connection(pool, "dead show", false, [&](pqxx::connection& c) -> std::optional<DeadRecord> {
        pqxx::nontransaction statement(c);
        const auto rows = statement.exec_params(statement_sql, id);
        if (rows.empty()) return std::nullopt;
        return read_record(rows[0], kind, true);
      });
  if (!record)
    throw OperatorError("DEAD_RECORD_NOT_FOUND",
                        std::string("no DEAD ") + to_string(kind) + " record with id " + std::to_string(id));
  return std::move(*record);
}

ActionResult dead_retry(ConnectionPool& pool, const std::string& schema, RecordKind kind, const DeadFilter& filter,
                        const std::string& actor, bool dry_run) {
  return dead_action(pool, schema, kind, filter, actor, dry_run, true);
}

ActionResult dead_discard(ConnectionPool& pool, const std::string& schema, RecordKind kind, const DeadFilter& filter,
                          const std::string& actor, bool dry_run) {
  return dead_action(pool, schema, kind, filter, actor, dry_run, false);
}

}  // namespace boxcar
