// The pool's session reset: one multi-statement round trip, then the prepared-statement check.
#include "session_reset.hpp"

#include <vector>

#include "core_queries.hpp"

namespace boxcar::detail {
namespace {

// The server's prepared statements (`on_server`) against those prepare_once() declared;
// false when the connection must be closed.
bool check_prepared(pqxx::connection& connection, std::unordered_set<std::string>& prepared,
                    const std::vector<std::string>& on_server) noexcept {
  try {
    std::unordered_set<std::string> registered;
    for (const auto& name : on_server) {
      // Prepared outside prepare_once(): libpqxx may not know it, and the next borrower's
      // PREPARE of that name would fail. Only a new session clears it safely.
      if (!prepared.contains(name)) return false;
      registered.insert(name);
    }
    std::vector<std::string> missing;
    for (const auto& name : prepared)
      if (!registered.contains(name)) missing.push_back(name);
    for (const auto& name : missing) {
      // Declared but never registered (its first use failed): libpqxx forgets it without a
      // round trip. Registered and then deallocated behind libpqxx's back: unprepare()
      // sends a DEALLOCATE that fails, and the connection is closed.
      connection.unprepare(name);
      prepared.erase(name);
    }
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace

bool reset_session(pqxx::connection& connection, std::unordered_set<std::string>& prepared) noexcept {
  try {
    pqxx::result on_server;
    {
      // Autocommit: the statements run in the implicit transaction of one simple query.
      pqxx::nontransaction statement(connection);
      on_server = statement.exec(core_sql::kResetSession);
    }
    std::vector<std::string> names;
    names.reserve(on_server.size());
    for (const auto& row : on_server) names.emplace_back(row["name"].c_str());
    return check_prepared(connection, prepared, names);
  } catch (...) {
    return false;
  }
}

}  // namespace boxcar::detail
