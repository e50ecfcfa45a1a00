// schema_readiness(): the `migrations` check of /readyz.
#include "schema_readiness.hpp"

namespace boxcar::detail {

SchemaReadiness schema_readiness(const std::optional<SchemaCompatibility>& schema) {
  if (!schema) return {.ok = false, .why = "migrations not checked (database unreachable)"};
  if (schema->compatible) return {.ok = true, .why = {}};
  return {.ok = false, .why = schema->detail};
}

}  // namespace boxcar::detail
