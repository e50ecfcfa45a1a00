// Translation of libpqxx exceptions into boxcar::DatabaseError at Boxcar's boundaries,
// so callers branch on codes and on uncertain() rather than on libpqxx types.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include <pqxx/except>

#include "boxcar/core/error.hpp"

namespace boxcar::detail {

/// SQLSTATE classes that a caller may retry with a fresh transaction.
bool is_transient_sqlstate(std::string_view sqlstate) noexcept;

/// The SQLSTATE of a libpqxx failure, including the ones libpqxx 6.4 throws without it:
/// 40000/40001/40003/40P01 (transaction_rollback and its subclasses, which are not even
/// sql_errors there), 42501 (insufficient_privilege) and 53300 (too_many_connections, a
/// broken_connection). Empty when the failure carries none (a client-side failure).
std::string sqlstate_of(const pqxx::failure& e);

/// Converts the exception in `error` (typically std::current_exception()) into a
/// DatabaseError whose message starts with `doing`. `commit_in_flight` says whether the
/// failed call could have committed (a COMMIT, or an autocommit write): a lost
/// connection then makes the outcome uncertain. Non-database exceptions are rethrown.
DatabaseError to_database_error(std::exception_ptr error, std::string_view doing, bool commit_in_flight);

}  // namespace boxcar::detail
