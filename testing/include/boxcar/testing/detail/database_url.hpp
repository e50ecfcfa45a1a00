// The connection string of another database on the same server, for the test kit's copies
// of its template database (TestSchemaOptions::from_template). Not public API.
#pragma once

#include <string>

namespace boxcar::detail {

/// `url` naming `database` instead: a postgresql:// or postgres:// URL gets it as its path
/// (any `dbname` query parameter, which would override the path, is removed); a
/// keyword/value string gets ` dbname=<database>` appended, which libpq lets override an
/// earlier dbname. `database` must be a plain identifier (letters, digits, underscores).
std::string with_database(const std::string& url, const std::string& database);

}  // namespace boxcar::detail
