// Translation of libpqxx exceptions into boxcar::DatabaseError at Boxcar's boundaries,
// so callers branch on codes and on uncertain() rather than on libpqxx types.
#pragma once

#include <exception>
#include <string_view>

#include "boxcar/core/error.hpp"

namespace boxcar::detail {

/// SQLSTATE classes that a caller may retry with a fresh transaction.
bool is_transient_sqlstate(std::string_view sqlstate) noexcept;

/// Converts the exception in `error` (typically std::current_exception()) into a
/// DatabaseError whose message starts with `doing`. `commit_in_flight` says whether the
/// failed call could have committed (a COMMIT, or an autocommit write): a lost
/// connection then makes the outcome uncertain. Non-database exceptions are rethrown.
DatabaseError to_database_error(std::exception_ptr error, std::string_view doing, bool commit_in_flight);

}  // namespace boxcar::detail
