// Blocked ordering keys and their release (SQL in operator_queries.hpp).
#include "boxcar/ops/ordering_keys.hpp"

#include "operator_queries.hpp"
#include "operator_support.hpp"

namespace boxcar {

namespace detail {

std::vector<BlockedKey> read_blocked_keys(pqxx::transaction_base& tx, const std::string& schema, std::size_t limit) {
  const std::string sql = operator_statement(operator_sql::kBlockedKeys, schema);
  std::vector<BlockedKey> keys;
  for (const auto& row : tx.exec_params(sql, static_cast<long long>(limit), kBlockedKeyWaitingCap))
    keys.push_back({.consumer = row["consumer"].as<std::string>(),
                    .key = row["ordering_key"].as<std::string>(),
                    .head_id = row["head_id"].as<std::int64_t>(),
                    .head_status = row["head_status"].as<std::string>(),
                    .head_attempts = row["head_attempts"].as<int>(),
                    .head_error_type = row["head_error_type"].as<std::string>(),
                    .head_error = row["head_error"].as<std::string>(),
                    .blocked_for = std::chrono::milliseconds(row["blocked_ms"].as<std::int64_t>()),
                    .waiting = row["waiting"].as<std::int64_t>()});
  return keys;
}

}  // namespace detail

std::vector<BlockedKey> blocked_keys(ConnectionPool& pool, const std::string& schema, std::size_t limit) {
  return detail::with_operator_connection(pool, "blocked keys", false, [&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    return detail::read_blocked_keys(tx, schema, limit);
  });
}

std::vector<UnblockedKey> unblock_key(ConnectionPool& pool, const std::string& schema, const std::string& key,
                                      const std::string& consumer) {
  const std::string sql = detail::operator_statement(detail::operator_sql::kUnblockKey, schema);
  return detail::with_operator_connection(pool, "dead unblock", true, [&](pqxx::connection& c) {
    pqxx::nontransaction tx(c);
    std::vector<UnblockedKey> released;
    for (const auto& row : tx.exec_params(sql, consumer, key))
      released.push_back({.consumer = row["consumer"].as<std::string>(), .receipt_id = row["id"].as<std::int64_t>()});
    return released;
  });
}

}  // namespace boxcar
