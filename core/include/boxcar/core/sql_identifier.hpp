// Schema names are the only identifiers Boxcar splices into SQL (values are always
// parameters), so they are validated to a conservative shape and quoted.
#pragma once

#include <string>
#include <string_view>

namespace boxcar {

inline constexpr std::string_view kDefaultSchema = "boxcar";

/// Returns `name` when it is a lower-case SQL identifier ([a-z_][a-z0-9_]*, at most 48
/// bytes); otherwise throws ConfigError naming `key`.
std::string validate_schema_name(std::string_view name, std::string_view key = "schema");

/// `name` as a double-quoted SQL identifier ("" doubles embedded quotes).
std::string quote_identifier(std::string_view name);

}  // namespace boxcar
