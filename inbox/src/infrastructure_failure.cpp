// Classification of failures before a handler ran.
#include "infrastructure_failure.hpp"

#include <pqxx/pqxx>

#include "boxcar/core/error.hpp"

namespace boxcar::detail {

namespace {

bool is_outage_sqlstate(const std::string& state) {
  return state.starts_with("08") || state.starts_with("53") || state.starts_with("58") || state == "57P01" ||
         state == "57P02" || state == "57P03";
}

}  // namespace

bool is_database_outage(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const DatabaseError& e) {
    return e.code() == "DATABASE_UNAVAILABLE" || is_outage_sqlstate(e.sqlstate());
  } catch (const pqxx::broken_connection&) {
    return true;
  } catch (const pqxx::sql_error& e) {
    return is_outage_sqlstate(e.sqlstate());
  } catch (...) {
    return false;
  }
}

InfrastructureFailure classify_infrastructure_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const DatabaseError& e) {
    if (e.code() == "DATABASE_POOL_TIMEOUT") return {"pool_timeout", e.what()};
    if (e.code() == "DATABASE_UNAVAILABLE" || e.sqlstate().starts_with("08")) return {"connection_lost", e.what()};
    return {"database_error", e.what()};
  } catch (const pqxx::broken_connection& e) {
    return {"connection_lost", e.what()};
  } catch (const pqxx::sql_error& e) {
    const std::string state = e.sqlstate();
    // A terminated backend (57P01/57P02) is a connection lost from the worker's side.
    const bool lost = state.starts_with("08") || state == "57P01" || state == "57P02";
    if (lost) return {"connection_lost", e.what()};
    if (state.starts_with("53")) return {"insufficient_resources", e.what()};
    return {"database_error", e.what()};
  } catch (const pqxx::failure& e) {
    return {"database_error", e.what()};
  } catch (const std::exception& e) {
    return {"other", e.what()};
  } catch (...) {
    return {"other", "a non-standard exception"};
  }
}

}  // namespace boxcar::detail
