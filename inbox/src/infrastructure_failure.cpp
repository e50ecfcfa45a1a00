// Classification of failures before a handler ran.
#include "infrastructure_failure.hpp"

#include <pqxx/pqxx>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/error.hpp"

namespace boxcar::detail {

namespace {

// One table of what a SQLSTATE means to the worker: the label, and whether the database
// itself failed (an outage) rather than the statement.
InfrastructureFailure from_sqlstate(const std::string& state, std::string message) {
  // A terminated backend (57P01/57P02) is a connection lost from the worker's side.
  if (state.starts_with("08") || state == "57P01" || state == "57P02")
    return {"connection_lost", std::move(message), true};
  if (state.starts_with("53")) return {"insufficient_resources", std::move(message), true};
  if (state.starts_with("58") || state == "57P03") return {"database_error", std::move(message), true};
  return {"database_error", std::move(message), false};
}

}  // namespace

InfrastructureFailure classify_infrastructure_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const DatabaseError& e) {
    if (e.code() == "DATABASE_POOL_TIMEOUT") return {"pool_timeout", e.what(), false};
    if (e.code() == "DATABASE_UNAVAILABLE") return {"connection_lost", e.what(), true};
    return from_sqlstate(e.sqlstate(), e.what());
  } catch (const pqxx::broken_connection& e) {
    return {"connection_lost", e.what(), true};
  } catch (const pqxx::failure& e) {
    return from_sqlstate(sqlstate_of(e), e.what());
  } catch (const std::exception& e) {
    return {"other", e.what(), false};
  } catch (...) {
    return {"other", "a non-standard exception", false};
  }
}

bool is_database_outage(std::exception_ptr error) { return classify_infrastructure_failure(error).outage; }

}  // namespace boxcar::detail
