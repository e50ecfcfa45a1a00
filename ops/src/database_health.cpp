// The database health report (database_health.hpp; SQL in console_queries.hpp): catalog
// and statistics views only, so it costs the same whatever the backlog.
#include "boxcar/ops/database_health.hpp"

#include "boxcar/core/migrate.hpp"
#include "console_queries.hpp"
#include "operator_support.hpp"

namespace boxcar {
namespace {

namespace sql = detail::console_sql;

constexpr long long kMostTables = 50;
constexpr long long kMostLockWaits = 50;
constexpr long long kMostXminHolders = 5;

double seconds(std::chrono::milliseconds age) { return static_cast<double>(age.count()) / 1000.0; }

nlohmann::json parse_or_null(const pqxx::field& field) {
  if (field.is_null()) return nullptr;
  return nlohmann::json::parse(field.c_str(), nullptr, /*allow_exceptions=*/false);
}

}  // namespace

namespace detail {

std::vector<XminHolder> read_xmin_holders(pqxx::transaction_base& tx, std::size_t limit) {
  std::vector<XminHolder> holders;
  for (const auto& row : tx.exec_params(sql::kXminHolders, static_cast<long long>(limit)))
    holders.push_back({.pid = row["pid"].as<int>(),
                       .application_name = row["application_name"].as<std::string>(),
                       .user = row["usename"].as<std::string>(),
                       .database = row["datname"].as<std::string>(),
                       .state = row["state"].as<std::string>(),
                       .backend_type = row["backend_type"].as<std::string>(),
                       .xmin_age = row["xmin_age"].as<std::int64_t>(),
                       .transaction_age = std::chrono::milliseconds(
                           static_cast<std::int64_t>(row["xact_age_seconds"].as<double>() * 1000.0)),
                       .query_start = optional_time(row["query_start_us"])});
  return holders;
}

}  // namespace detail

std::vector<XminHolder> xmin_holders(ConnectionPool& pool, std::size_t limit) {
  return detail::with_operator_connection(pool, "xmin holders", false, [&](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    return detail::read_xmin_holders(tx, limit);
  });
}

nlohmann::json to_json(const XminHolder& h) {
  return {{"pid", h.pid},
          {"application_name", h.application_name},
          {"user", h.user},
          {"database", h.database},
          {"state", h.state},
          {"backend_type", h.backend_type},
          {"xmin_age", h.xmin_age},
          {"transaction_age_seconds", seconds(h.transaction_age)},
          {"query_start", detail::time_json(h.query_start)}};
}

nlohmann::json database_health_document(ConnectionPool& pool, const std::string& schema) {
  const std::string checked = validate_schema_name(schema);
  return detail::with_operator_connection(pool, "database health", false, [&](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    nlohmann::json out;
    out["xmin_holders"] = nlohmann::json::array();
    for (const auto& holder : detail::read_xmin_holders(tx, kMostXminHolders))
      out["xmin_holders"].push_back(to_json(holder));

    out["replication_slots"] = nlohmann::json::array();
    for (const auto& row : tx.exec(sql::kReplicationSlots))
      out["replication_slots"].push_back({{"slot_name", row["slot_name"].as<std::string>()},
                                          {"slot_type", row["slot_type"].as<std::string>()},
                                          {"active", row["active"].as<bool>()},
                                          {"database", row["database"].as<std::string>()},
                                          {"retained_wal_bytes", row["retained_wal_bytes"].as<std::int64_t>()},
                                          {"xmin_age", row["xmin_age"].as<std::int64_t>()},
                                          {"wal_status", row["wal_status"].as<std::string>()}});

    out["tables"] = nlohmann::json::array();
    for (const auto& row : tx.exec_params(sql::kTableHealth, checked, kMostTables))
      out["tables"].push_back(
          {{"table", row["table_name"].as<std::string>()},
           {"live_tuples", row["live_tuples"].as<std::int64_t>()},
           {"dead_tuples", row["dead_tuples"].as<std::int64_t>()},
           {"last_vacuum", detail::time_json(detail::optional_time(row["last_vacuum_us"]))},
           {"last_autovacuum", detail::time_json(detail::optional_time(row["last_autovacuum_us"]))},
           {"last_autoanalyze", detail::time_json(detail::optional_time(row["last_autoanalyze_us"]))},
           {"autovacuum_count", row["autovacuum_count"].as<std::int64_t>()}});

    out["notification_queue_usage"] = tx.exec(sql::kNotifyQueue).at(0)["usage"].as<double>();

    out["lock_waits"] = nlohmann::json::array();
    for (const auto& row : tx.exec_params(sql::kLockWaits, checked, kMostLockWaits))
      out["lock_waits"].push_back({{"pid", row["pid"].as<int>()},
                                   {"application_name", row["application_name"].as<std::string>()},
                                   {"table", row["table_name"].as<std::string>()},
                                   {"mode", row["mode"].as<std::string>()},
                                   {"waiting_seconds", row["waiting_seconds"].as<double>()},
                                   {"blocked_by", parse_or_null(row["blocked_by"])}});

    const SchemaCompatibility migrations = check_schema_compatibility(tx, {.schema = checked});
    out["migrations"] = {{"applied_version", migrations.applied_version},
                         {"build_version", migrations.build_version},
                         {"compatible", migrations.compatible},
                         {"detail", migrations.detail}};
    tx.commit();
    return out;
  });
}

}  // namespace boxcar
