// schema_readiness(): the `migrations` check of /readyz.
#include "schema_readiness.hpp"

#include "boxcar/core/migrate.hpp"

namespace boxcar::detail {

SchemaReadiness schema_readiness(std::optional<int> applied_version) {
  if (!applied_version) return {.ok = false, .why = "migrations not checked (database unreachable)"};
  const int expected = latest_migration_version();
  if (*applied_version == expected) return {.ok = true, .why = {}};
  return {.ok = false,
          .why = "migrations at version " + std::to_string(*applied_version) + ", this build expects " +
                 std::to_string(expected)};
}

}  // namespace boxcar::detail
