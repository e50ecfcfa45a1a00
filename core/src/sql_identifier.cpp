// Validation and quoting of the schema identifier spliced into Boxcar's SQL.
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/detail/with_schema.hpp"

#include "boxcar/core/error.hpp"
#include "replace_all.hpp"

namespace boxcar {

std::string validate_schema_name(std::string_view name, std::string_view key) {
  auto fail = [&](const std::string& why) -> std::string {
    throw ConfigError(std::string(key), why + " (got '" + std::string(name) + "')");
  };
  if (name.empty()) return fail("schema name must not be empty");
  // 48 leaves room for the NOTIFY channel prefix within PostgreSQL's 63-byte names.
  if (name.size() > 48) return fail("schema name must be at most 48 bytes");
  if (!(name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z')))
    return fail("schema name must start with a lower-case letter or '_'");
  for (char c : name) {
    if (!(c == '_' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
      return fail("schema name may contain only a-z, 0-9 and '_'");
  }
  return std::string(name);
}

std::string quote_identifier(std::string_view name) {
  std::string quoted = "\"";
  for (char c : name) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  quoted += '"';
  return quoted;
}

std::string detail::with_schema(std::string_view sql, std::string_view schema) {
  std::string out(sql);
  detail::replace_all(out, "{schema}", quote_identifier(schema));
  return out;
}

}  // namespace boxcar
