// The runtime's named statements, for the test that prepares every component's SQL.
#include "boxcar/runtime/detail/named_statements.hpp"

#include "runtime_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> runtime_statements() {
  return {{"runtime.migrate_lock", runtime_sql::kMigrateLock},
          {"runtime.migrate_unlock", runtime_sql::kMigrateUnlock},
          {"runtime.notify_many", runtime_sql::kNotifyMany}};
}

}  // namespace boxcar::detail
