// The core's named statements, for the test that prepares every component's SQL.
#include "boxcar/core/detail/named_statements.hpp"

#include "core_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> core_statements() {
  return {{"core.migrate_lock", core_sql::kMigrateLock},
          {"core.migrate_unlock", core_sql::kMigrateUnlock},
          {"core.notify_many", core_sql::kNotifyMany}};
}

}  // namespace boxcar::detail
