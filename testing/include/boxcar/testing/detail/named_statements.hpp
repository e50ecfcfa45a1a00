// The testing library's named SQL statements, for the test that prepares every
// component's statements (boxcar/core/detail/named_statements.hpp). Not public API.
#pragma once

#include <vector>

#include "boxcar/core/detail/named_statements.hpp"

namespace boxcar::detail {

/// testing_queries.hpp (the test kit's helpers).
std::vector<NamedStatement> testing_statements();

}  // namespace boxcar::detail
