// drop_roles(): the end of a test that applied roles (boxcar/testing/roles.hpp).
#include "boxcar/testing/roles.hpp"

#include <pqxx/pqxx>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/sql_identifier.hpp"

namespace boxcar::testing {

void drop_roles(const std::string& url, const RolesOptions& options) {
  const RoleNames names = role_names(options);
  try {
    pqxx::connection connection(url);
    pqxx::work tx(connection);
    for (const auto& role :
         {names.migrator, names.ingress, names.worker, names.publisher, names.operator_, names.console}) {
      if (!tx.exec_params1("SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)", role)[0].as<bool>())
        continue;
      const std::string quoted = quote_identifier(role);
      // REASSIGN first: DROP OWNED would drop the schema's tables the migrator owns.
      tx.exec("REASSIGN OWNED BY " + quoted + " TO CURRENT_USER");
      tx.exec("DROP OWNED BY " + quoted);
      tx.exec("DROP ROLE " + quoted);
    }
    tx.commit();
  } catch (...) {
    throw detail::to_database_error(std::current_exception(), "dropping the test roles", false);
  }
}

}  // namespace boxcar::testing
