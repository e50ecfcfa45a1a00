// How each component's named queries are bound to the configured schema, once, at
// construction. Not public API: applications pass a schema name, never SQL.
#pragma once

#include <string>
#include <string_view>

namespace boxcar::detail {

/// `sql` with every `{schema}` replaced by quote_identifier(schema).
std::string with_schema(std::string_view sql, std::string_view schema);

}  // namespace boxcar::detail
