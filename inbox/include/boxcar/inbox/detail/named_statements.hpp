// The inbox library's named SQL statements, for the test that prepares every
// component's statements (boxcar/core/detail/named_statements.hpp). Not public API.
#pragma once

#include <vector>

#include "boxcar/core/detail/named_statements.hpp"

namespace boxcar::detail {

/// inbox_queries.hpp (accept) and worker_queries.hpp (worker).
std::vector<NamedStatement> inbox_statements();

}  // namespace boxcar::detail
