// Blocked ordering keys and their release (SQL in operator_queries.hpp).
#include "boxcar/ops/ordering_keys.hpp"

#include <set>

#include "operator_queries.hpp"
#include "operator_support.hpp"

namespace boxcar {

namespace {

Scope scope_of(const pqxx::row& row) {
  return row["scope_kind"].as<std::string>() == "global" ? Scope::global()
                                                         : Scope::tenant(row["scope_id"].as<std::string>());
}

}  // namespace

namespace detail {

std::vector<BlockedKey> read_blocked_keys(pqxx::transaction_base& tx, const std::string& schema, std::size_t limit) {
  const std::string sql = operator_statement(operator_sql::kBlockedKeys, schema);
  std::vector<BlockedKey> keys;
  for (const auto& row : tx.exec_params(sql, static_cast<long long>(limit), kBlockedKeyWaitingCap))
    keys.push_back({.consumer = row["consumer"].as<std::string>(),
                    .scope = scope_of(row),
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

std::vector<UnblockedKey> unblock_key(ConnectionPool& pool, const std::string& schema, const UnblockRequest& request) {
  if (request.key.empty()) throw OperatorError("UNBLOCK_KEY_REQUIRED", "dead unblock needs the ordering key");
  if (request.actor.empty()) throw OperatorError("DEAD_ACTOR_REQUIRED", "dead unblock needs an actor");
  const std::string sql = detail::operator_statement(detail::operator_sql::kUnblockKey, schema);
  const std::string scope_kind = request.scope ? to_string(request.scope->kind) : "";
  const std::string scope_id = request.scope ? request.scope->id : "";
  return detail::with_operator_connection(pool, "dead unblock", true, [&](pqxx::connection& c) {
    pqxx::work tx(c);
    std::vector<UnblockedKey> released;
    std::set<std::string> scopes;
    for (const auto& row : tx.exec_params(sql, request.consumer, request.key, scope_kind, scope_id, request.actor)) {
      released.push_back({.consumer = row["consumer"].as<std::string>(),
                          .scope = scope_of(row),
                          .receipt_id = row["id"].as<std::int64_t>()});
      scopes.insert(to_string(released.back().scope));
    }
    // Rolled back with the transaction: one tenant's key is released only when asked for.
    if (!request.scope && !request.every_scope && scopes.size() > 1) {
      std::string named;
      for (const auto& scope : scopes) named += (named.empty() ? "" : ", ") + scope;
      throw OperatorError("UNBLOCK_SCOPE_REQUIRED", "key '" + request.key + "' is blocked by a DEAD head in " +
                                                        std::to_string(scopes.size()) + " scopes (" + named +
                                                        "): name one, or release it in every scope");
    }
    if (!request.dry_run) tx.commit();  // a dry run's transaction rolls back as it goes
    return released;
  });
}

}  // namespace boxcar
