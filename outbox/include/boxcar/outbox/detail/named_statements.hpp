// The outbox library's named SQL statements, for the test that prepares every
// component's statements (boxcar/core/detail/named_statements.hpp). Not public API.
#pragma once

#include <vector>

#include "boxcar/core/detail/named_statements.hpp"

namespace boxcar::detail {

/// outbox_queries.hpp (the emitter).
std::vector<NamedStatement> outbox_statements();

}  // namespace boxcar::detail
