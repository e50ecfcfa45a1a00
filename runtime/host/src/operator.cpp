// Operator commands: status, dead-record recovery and purge (SQL in operator_queries.hpp;
// text and JSON rendering in operator_format.cpp).
#include "boxcar/host/operator.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/runtime/database_errors.hpp"
#include "boxcar/runtime/logging.hpp"
#include "boxcar/runtime/sql_identifier.hpp"
#include "operator_queries.hpp"

namespace boxcar {
namespace {

// Runs `work(connection)` on a pooled connection; libpqxx failures become DatabaseError.
// `writes` says whether an autocommit write may have been in flight (uncertain outcome
// when the connection drops).
template <typename Work>
auto with_connection(ConnectionPool& pool, std::string_view doing, bool writes, Work&& work) {
  PooledConnection connection = pool.acquire();
  try {
    return work(*connection);
  } catch (const Error&) {
    throw;
  } catch (...) {
    // The session may be mid-statement or broken: never hand it to the next user.
    connection.discard();
    throw to_database_error(std::current_exception(), doing, writes);
  }
}

std::string schema_sql(const char* sql, const std::string& schema) {
  return with_schema(sql, validate_schema_name(schema));
}

Timestamp from_micros(std::int64_t micros) {
  return Timestamp(std::chrono::duration_cast<Timestamp::duration>(std::chrono::microseconds(micros)));
}

std::optional<Timestamp> optional_time(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return from_micros(field.as<std::int64_t>());
}

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

DeadRecord read_record(const pqxx::row& row, RecordKind kind, bool detail) {
  DeadRecord r;
  r.kind = kind;
  r.id = row[0].as<std::int64_t>();
  r.scope_kind = row[1].as<std::string>();
  r.scope_id = row[2].as<std::string>();
  r.source = row[3].as<std::string>();
  r.consumer = row[4].as<std::string>();
  r.message_id = row[5].as<std::string>();
  r.event_id = row[6].as<std::string>();
  r.topic = row[7].as<std::string>();
  r.message_key = row[8].as<std::string>();
  r.event_type = row[9].as<std::string>();
  r.schema_version = row[10].as<int>();
  r.attempts = row[11].as<int>();
  r.dead_reason = row[12].as<std::string>();
  r.last_error_type = row[13].as<std::string>();
  r.last_error = row[14].as<std::string>();
  r.created_at = from_micros(row[15].as<std::int64_t>());
  r.updated_at = from_micros(row[16].as<std::int64_t>());
  r.replay_count = row[17].as<int>();
  r.last_replayed_at = optional_time(row[18]);
  r.last_replayed_by = row[19].as<std::string>();
  r.discarded_at = optional_time(row[20]);
  r.discarded_by = row[21].as<std::string>();
  r.failure = row[22].as<std::string>();
  r.group = row[23].as<std::string>();
  if (detail) {
    r.content_fingerprint = row[24].as<std::string>();
    r.payload = parse_json(row[25]);
    r.metadata = parse_json(row[26]);
  }
  return r;
}

// The $1..$7 values every dead-record statement takes (see operator_queries.hpp).
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
pqxx::result exec_filtered(pqxx::transaction_base& tx, const std::string& sql, const BoundFilter& b,
                           Extra&&... extra) {
  return tx.exec_params(sql, b.ids, b.consumer, b.event_type, b.error_contains, b.older_than_seconds, b.group,
                        b.limit, std::forward<Extra>(extra)...);
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
  for (const auto& row : rows) ids.push_back(row[0].as<std::int64_t>());
  std::sort(ids.begin(), ids.end());
  return ids;
}

ActionResult dead_action(ConnectionPool& pool, const std::string& schema, RecordKind kind, const DeadFilter& filter,
                         const std::string& actor, bool dry_run, bool retry) {
  const char* action = retry ? "retry" : "discard";
  if (!has_criterion(filter) && !filter.all)
    throw OperatorError("DEAD_FILTER_REQUIRED",
                        std::string("dead ") + action +
                            " needs a filter (ids, consumer, event type, error text, age or group); "
                            "pass all = true to act on every DEAD record");
  if (actor.empty()) throw OperatorError("DEAD_ACTOR_REQUIRED", std::string("dead ") + action + " needs an actor");
  const BoundFilter bound = bind(kind, filter);
  const bool inbox = kind == RecordKind::Inbox;
  const char* text = dry_run ? (inbox ? operator_sql::kInboxMatching : operator_sql::kOutboxMatching)
                     : retry ? (inbox ? operator_sql::kInboxRetry : operator_sql::kOutboxRetry)
                             : (inbox ? operator_sql::kInboxDiscard : operator_sql::kOutboxDiscard);
  const std::string sql = schema_sql(text, schema);
  const std::string channel =
      inbox ? Inbox::notify_channel(schema) : OutboxEmitter::notify_channel(schema);

  ActionResult result{.action = action, .kind = kind, .dry_run = dry_run};
  result.ids = with_connection(pool, std::string("dead ") + action, !dry_run, [&](pqxx::connection& c) {
    pqxx::nontransaction statement(c);
    const auto ids = dry_run ? read_ids(exec_filtered(statement, sql, bound))
                             : read_ids(exec_filtered(statement, sql, bound, actor));
    if (retry && !dry_run && !ids.empty()) {
      // A hint only: workers and publishers poll, so a lost wake-up costs latency, and the
      // retry already committed (the pool re-checks a connection that broke here).
      try {
        statement.exec_params(operator_sql::kNotify, channel);
      } catch (const std::exception& e) {
        logger("operator")->warn("dead retry: wake-up NOTIFY failed: {}", e.what());
      }
    }
    return ids;
  });
  result.limit_reached = result.ids.size() >= filter.limit;
  logger("operator")->info("dead {} kind={} count={} actor={} dry_run={} filter: {}", action, to_string(kind),
                           result.ids.size(), actor, dry_run, describe(filter));
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

StatusReport status(ConnectionPool& pool, const std::string& schema,
                    const std::vector<std::string>& declared_consumers) {
  const std::string inbox_sql = schema_sql(operator_sql::kInboxStatus, schema);
  const std::string outbox_sql = schema_sql(operator_sql::kOutboxStatus, schema);

  StatusReport report{.schema = schema};
  std::map<std::string, InboxConsumerStatus> consumers;
  for (const auto& name : declared_consumers) consumers[name] = {.consumer = name, .declared = true};

  with_connection(pool, "status", false, [&](pqxx::connection& c) {
    // One snapshot for both tables, so a message moving between them is counted once.
    pqxx::transaction<pqxx::repeatable_read, pqxx::read_only> tx(c);
    for (const auto& row : tx.exec(inbox_sql)) {
      const auto name = row[0].as<std::string>();
      auto& entry = consumers[name];
      entry.consumer = name;
      const auto status = row[1].as<std::string>();
      const auto live = row[2].as<std::int64_t>();
      if (status == "PENDING") entry.pending += live;
      else if (status == "PROCESSING") entry.processing += live;
      else if (status == "RETRYABLE") entry.retryable += live;
      else if (status == "COMPLETED") entry.completed += live;
      else if (status == "DEAD") entry.dead += live;
      entry.discarded += row[3].as<std::int64_t>();
      entry.oldest_due_age = std::max(entry.oldest_due_age, std::chrono::milliseconds(row[4].as<std::int64_t>()));
    }
    auto& out = report.outbox;
    for (const auto& row : tx.exec(outbox_sql)) {
      const auto status = row[0].as<std::string>();
      const auto live = row[1].as<std::int64_t>();
      if (status == "PENDING") out.pending += live;
      else if (status == "PUBLISHING") out.publishing += live;
      else if (status == "RETRYABLE") out.retryable += live;
      else if (status == "PUBLISHED") out.published += live;
      else if (status == "DEAD") out.dead += live;
      out.discarded += row[2].as<std::int64_t>();
      out.oldest_unpublished_age =
          std::max(out.oldest_unpublished_age, std::chrono::milliseconds(row[3].as<std::int64_t>()));
    }
    tx.commit();
  });
  for (auto& [name, entry] : consumers) report.inbox.push_back(std::move(entry));
  return report;
}

std::vector<DeadRecord> dead_list(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                  const DeadFilter& filter) {
  const BoundFilter bound = bind(kind, filter);
  const std::string sql = schema_sql(
      kind == RecordKind::Inbox ? operator_sql::kInboxDeadList : operator_sql::kOutboxDeadList, schema);
  return with_connection(pool, "dead list", false, [&](pqxx::connection& c) {
    pqxx::nontransaction statement(c);
    std::vector<DeadRecord> records;
    for (const auto& row : exec_filtered(statement, sql, bound)) records.push_back(read_record(row, kind, false));
    return records;
  });
}

std::vector<DeadGroup> dead_groups(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                                   const DeadFilter& filter) {
  const BoundFilter bound = bind(kind, filter);
  const std::string sql = schema_sql(
      kind == RecordKind::Inbox ? operator_sql::kInboxDeadGroups : operator_sql::kOutboxDeadGroups, schema);
  return with_connection(pool, "dead groups", false, [&](pqxx::connection& c) {
    pqxx::nontransaction statement(c);
    std::vector<DeadGroup> groups;
    for (const auto& row : exec_filtered(statement, sql, bound)) {
      groups.push_back({.group = row[0].as<std::string>(),
                        .failure = row[1].as<std::string>(),
                        .count = row[2].as<std::int64_t>(),
                        .first_seen = from_micros(row[3].as<std::int64_t>()),
                        .last_seen = from_micros(row[4].as<std::int64_t>()),
                        .consumers = sorted_strings(row[5]),
                        .event_types = sorted_strings(row[6]),
                        .topics = sorted_strings(row[7]),
                        .dead_reasons = sorted_strings(row[8])});
    }
    return groups;
  });
}

DeadRecord dead_show(ConnectionPool& pool, const std::string& schema, RecordKind kind, std::int64_t id) {
  const std::string sql = schema_sql(
      kind == RecordKind::Inbox ? operator_sql::kInboxDeadShow : operator_sql::kOutboxDeadShow, schema);
  auto record = with_connection(pool, "dead show", false, [&](pqxx::connection& c) -> std::optional<DeadRecord> {
    pqxx::nontransaction statement(c);
    const auto rows = statement.exec_params(sql, id);
    if (rows.empty()) return std::nullopt;
    return read_record(rows[0], kind, true);
  });
  if (!record)
    throw OperatorError("DEAD_RECORD_NOT_FOUND", std::string("no DEAD ") + to_string(kind) + " record with id " +
                                                     std::to_string(id));
  return std::move(*record);
}

ActionResult dead_retry(ConnectionPool& pool, const std::string& schema, RecordKind kind, const DeadFilter& filter,
                        const std::string& actor, bool dry_run) {
  return dead_action(pool, schema, kind, filter, actor, dry_run, true);
}

ActionResult dead_discard(ConnectionPool& pool, const std::string& schema, RecordKind kind,
                          const DeadFilter& filter, const std::string& actor, bool dry_run) {
  return dead_action(pool, schema, kind, filter, actor, dry_run, false);
}

PurgeReport purge(ConnectionPool& pool, const std::string& schema, const PurgeOptions& options) {
  if (options.inbox_retention.count() < 0 || options.outbox_retention.count() < 0)
    throw OperatorError("PURGE_INVALID", "retention must not be negative");
  if (options.batch_size == 0) throw OperatorError("PURGE_INVALID", "batch_size must be at least 1");
  const auto batch = static_cast<long long>(
      std::min<std::size_t>(options.batch_size, std::numeric_limits<int>::max()));
  const auto inbox_seconds =
      static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(options.inbox_retention).count());
  const auto outbox_seconds =
      static_cast<long long>(std::chrono::duration_cast<std::chrono::seconds>(options.outbox_retention).count());

  PurgeReport report{.dry_run = options.dry_run};
  if (options.dry_run) {
    const auto inbox_sql = schema_sql(operator_sql::kPurgeInboxCount, schema);
    const auto outbox_sql = schema_sql(operator_sql::kPurgeOutboxCount, schema);
    with_connection(pool, "purge (dry run)", false, [&](pqxx::connection& c) {
      pqxx::nontransaction statement(c);
      report.inbox_deleted = statement.exec_params1(inbox_sql, inbox_seconds)[0].as<std::int64_t>();
      report.outbox_deleted = statement.exec_params1(outbox_sql, outbox_seconds)[0].as<std::int64_t>();
    });
  } else {
    // Each batch is an autocommit DELETE: locks are held for one batch only, and vacuum
    // can reclaim earlier batches while later ones run.
    const auto drain = [&](const char* text, long long seconds, std::int64_t& deleted, std::int64_t& batches) {
      const auto sql = schema_sql(text, schema);
      with_connection(pool, "purge", true, [&](pqxx::connection& c) {
        pqxx::nontransaction statement(c);
        while (true) {
          const auto n = static_cast<long long>(statement.exec_params(sql, seconds, batch).affected_rows());
          deleted += n;
          ++batches;
          if (n < batch) break;
        }
      });
    };
    drain(operator_sql::kPurgeInbox, inbox_seconds, report.inbox_deleted, report.inbox_batches);
    drain(operator_sql::kPurgeOutbox, outbox_seconds, report.outbox_deleted, report.outbox_batches);
  }
  logger("operator")->info(
      "purge dry_run={} inbox_deleted={} inbox_batches={} outbox_deleted={} outbox_batches={} "
      "inbox_retention={}h outbox_retention={}h batch_size={}",
      options.dry_run, report.inbox_deleted, report.inbox_batches, report.outbox_deleted, report.outbox_batches,
      options.inbox_retention.count(), options.outbox_retention.count(), options.batch_size);
  return report;
}

}  // namespace boxcar
