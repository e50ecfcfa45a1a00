// The ops library's named SQL statements, for the test that prepares every
// component's statements (boxcar/core/detail/named_statements.hpp). Not public API.
#pragma once

#include <vector>

#include "boxcar/core/detail/named_statements.hpp"

namespace boxcar::detail {

/// backlog_queries.hpp (the backlog collector), operator_queries.hpp (status, dead records, retention) and
/// console_queries.hpp (the operator console, database health).
std::vector<NamedStatement> ops_statements();

}  // namespace boxcar::detail
