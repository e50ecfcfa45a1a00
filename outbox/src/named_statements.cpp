// The outbox's named statements, for the test that prepares every component's SQL.
#include "boxcar/outbox/detail/named_statements.hpp"

#include "outbox_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> outbox_statements() { return {{"outbox.insert", outbox_sql::kInsert}}; }

}  // namespace boxcar::detail
