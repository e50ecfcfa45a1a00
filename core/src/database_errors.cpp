// Maps libpqxx's exception types onto DatabaseError codes.
#include <pqxx/pqxx>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/redaction.hpp"

namespace boxcar::detail {

bool is_transient_sqlstate(std::string_view sqlstate) noexcept {
  // 08: connection exception, 40: transaction rollback (serialization, deadlock),
  // 53: insufficient resources, 57P01..03: admin shutdown / crash / cannot connect now.
  return sqlstate.starts_with("08") || sqlstate.starts_with("40") || sqlstate.starts_with("53") ||
         sqlstate == "57P01" || sqlstate == "57P02" || sqlstate == "57P03";
}

std::string sqlstate_of(const pqxx::failure& e) {
  // Most specific first: the subclasses below derive from the classes checked after them.
  if (dynamic_cast<const pqxx::deadlock_detected*>(&e)) return "40P01";
  if (dynamic_cast<const pqxx::serialization_failure*>(&e)) return "40001";
  if (dynamic_cast<const pqxx::statement_completion_unknown*>(&e)) return "40003";
  if (dynamic_cast<const pqxx::transaction_rollback*>(&e)) return "40000";
  if (dynamic_cast<const pqxx::too_many_connections*>(&e)) return "53300";
  if (const auto* sql = dynamic_cast<const pqxx::sql_error*>(&e)) {
    if (!sql->sqlstate().empty()) return sql->sqlstate();
    if (dynamic_cast<const pqxx::insufficient_privilege*>(&e)) return "42501";
  }
  return {};
}

DatabaseError to_database_error(std::exception_ptr error, std::string_view doing, bool commit_in_flight) {
  const std::string prefix = std::string(doing) + ": ";
  // Connection errors were redacted where they were raised (open_connection); this catches
  // a connection string or password=... inside any other libpq text.
  const auto text = [](const std::exception& e) { return redact_secrets(e.what()); };
  try {
    std::rethrow_exception(error);
  } catch (const DatabaseError& e) {
    return e;
  } catch (const pqxx::in_doubt_error& e) {
    return DatabaseError("DATABASE_COMMIT_UNCERTAIN", prefix + text(e), {}, true);
  } catch (const pqxx::too_many_connections& e) {
    return DatabaseError("DATABASE_UNAVAILABLE", prefix + text(e), "53300");
  } catch (const pqxx::broken_connection& e) {
    if (commit_in_flight)
      return DatabaseError("DATABASE_COMMIT_UNCERTAIN",
                           prefix + "connection lost while the write may have committed: " + text(e), "08006", true);
    return DatabaseError("DATABASE_UNAVAILABLE", prefix + text(e), "08006");
  } catch (const pqxx::transaction_rollback& e) {
    // The statement rolled back before any commit: certain, and worth running again.
    return DatabaseError("DATABASE_ERROR", prefix + text(e), sqlstate_of(e));
  } catch (const pqxx::sql_error& e) {
    const std::string state = sqlstate_of(e);
    // An admin shutdown or terminated backend during an autocommit write is as uncertain
    // as a lost connection: the server may have committed before it went away.
    const bool lost = state == "57P01" || state == "57P02" || state.starts_with("08");
    return DatabaseError(
        lost ? (commit_in_flight ? "DATABASE_COMMIT_UNCERTAIN" : "DATABASE_UNAVAILABLE") : "DATABASE_ERROR",
        prefix + text(e), state, lost && commit_in_flight);
  } catch (const pqxx::failure& e) {
    return DatabaseError("DATABASE_ERROR", prefix + text(e));
  }
}

}  // namespace boxcar::detail
