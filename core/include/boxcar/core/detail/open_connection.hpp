// The one way Boxcar opens a libpqxx connection: libpq's error for a failed connection
// can quote the connection string or the password, so it is redacted here, before any
// caller can log it, store it or put it in an exception of its own.
#pragma once

#include <memory>
#include <string>

#include <pqxx/connection>

namespace boxcar::detail {

/// Connects to `conninfo` (eagerly).
/// @throws pqxx::broken_connection (or pqxx::failure) whose text has passed through
///   redact_connection_error(): the same types the caller already handles.
std::unique_ptr<pqxx::connection> open_connection(const std::string& conninfo);

}  // namespace boxcar::detail
