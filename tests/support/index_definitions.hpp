#pragma once

#include <string>

namespace boxcar::testing {

// The indexes of one schema as a subquery of (indexname, indexdef), for tests that read
// index definitions. pg_indexes is not safe for that while other tests run: the planner
// pushes a filter on indexdef down to the scan of pg_class, so pg_get_indexdef() runs on
// every same-named index in the database, and one whose schema a parallel test is dropping
// fails it with "could not open relation with OID". Here the definition is computed after
// the schema filter, and OFFSET 0 keeps the caller's filters out of the subquery.
inline std::string index_definitions_of(const std::string& schema) {
  return "(SELECT c.relname::text AS indexname, pg_catalog.pg_get_indexdef(c.oid) AS indexdef "
         "FROM pg_catalog.pg_class AS c JOIN pg_catalog.pg_namespace AS n ON n.oid = c.relnamespace "
         "WHERE n.nspname = '" +
         schema + "' AND c.relkind IN ('i', 'I') OFFSET 0) AS schema_indexes";
}

}  // namespace boxcar::testing
