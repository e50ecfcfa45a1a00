// What the operator commands (operator_status.cpp, dead_records.cpp, retention.cpp)
// share: a pooled connection with libpqxx failures translated, the schema bound into a
// statement, and timestamps read from `*_us` columns.
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "boxcar/ops/database_health.hpp"
#include "boxcar/ops/ordering_keys.hpp"
#include "boxcar/ops/record_kind.hpp"
#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/with_schema.hpp"

namespace boxcar::detail {

// Runs `work(connection)` on a pooled connection; libpqxx failures become DatabaseError.
// `writes` says whether an autocommit write may have been in flight (uncertain outcome
// when the connection drops).
template <typename Work>
auto with_operator_connection(ConnectionPool& pool, std::string_view doing, bool writes, Work&& work) {
  PooledConnection connection = pool.acquire(LoanUse::BoxcarOnly);  // operator statements only
  try {
    return work(*connection);
  } catch (const Error&) {
    throw;
  } catch (...) {
    // The session may be mid-statement or broken: never hand it to the next user.
    connection.discard();
    throw detail::to_database_error(std::current_exception(), doing, writes);
  }
}

/// `sql` bound to `schema`. @throws ConfigError for an invalid schema name.
inline std::string operator_statement(const char* sql, const std::string& schema) {
  return detail::with_schema(sql, validate_schema_name(schema));
}

/// Keys whose head failed, longest blocked first (ordering_keys.cpp), in the caller's
/// transaction: `boxcar status` reads them in its own snapshot.
std::vector<BlockedKey> read_blocked_keys(pqxx::transaction_base& tx, const std::string& schema, std::size_t limit);

/// The sessions holding back the xmin horizon, oldest first (database_health.cpp), in
/// the caller's transaction: `boxcar status` reads them in its own snapshot.
std::vector<XminHolder> read_xmin_holders(pqxx::transaction_base& tx, std::size_t limit);

/// RFC 3339 UTC ("2026-01-02T03:04:05Z"); `millis` adds ".mmm" (operator_format.cpp).
std::string format_time(Timestamp t, bool millis);
/// format_time(*t, true), or null.
nlohmann::json time_json(const std::optional<Timestamp>& t);

inline Timestamp from_micros(std::int64_t micros) {
  return Timestamp(std::chrono::duration_cast<Timestamp::duration>(std::chrono::microseconds(micros)));
}

/// A `*_us` column (microseconds since the epoch); NULL is no time.
inline std::optional<Timestamp> optional_time(const pqxx::field& field) {
  if (field.is_null()) return std::nullopt;
  return from_micros(field.as<std::int64_t>());
}

}  // namespace boxcar::detail
