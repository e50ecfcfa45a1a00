// Looking up a component's named statement (the lists the prepare-everything test reads)
// and reading the plan PostgreSQL picks for it.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <pqxx/pqxx>

#include "boxcar/core/detail/named_statements.hpp"

namespace boxcar::testing {

/// The SQL of the statement `name` in `statements` ({schema} not yet replaced); FAILs the
/// test when there is none.
inline std::string statement_sql(const std::vector<detail::NamedStatement>& statements, const std::string& name) {
  const auto sql = detail::find_statement(statements, name);
  if (!sql) FAIL("no statement " << name);
  return std::string(*sql);
}

/// The plan of `sql` (a statement with $n parameters) run with `arguments`, as `EXPLAIN
/// EXECUTE` prints it under the session's plan_cache_mode, one line per plan node.
inline std::string explain_prepared(pqxx::transaction_base& tx, const std::string& sql, const std::string& arguments) {
  tx.exec("DEALLOCATE ALL");
  tx.exec("PREPARE explained AS " + sql);
  std::string plan;
  for (const auto& row : tx.exec("EXPLAIN EXECUTE explained(" + arguments + ")"))
    plan += std::string(row[0].c_str()) + "\n";
  return plan;
}

}  // namespace boxcar::testing
