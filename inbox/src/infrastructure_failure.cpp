// Classification of database failures: their label, and the probe that tells an outage
// of the database from a failure of one statement.
#include "infrastructure_failure.hpp"

#include <pqxx/pqxx>

#include "boxcar/core/detail/database_errors.hpp"
#include "boxcar/core/error.hpp"

namespace boxcar::detail {

namespace {

// One table of what a SQLSTATE means to the worker: the label, and which probe can prove
// the database itself failed. Any of these codes also comes from a handler's own
// statement on a healthy server (temp_file_limit, a dblink or postgres_fdw peer, RAISE
// ... USING ERRCODE, pg_terminate_backend of that one session): only the probe decides.
InfrastructureFailure from_sqlstate(const std::string& state, std::string message) {
  // A terminated backend (57P01/57P02) is a connection lost from the worker's side.
  if (state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03")
    return {"connection_lost", std::move(message), OutageProbeKind::Connection};
  if (state == "53200" || state == "53300")
    return {"insufficient_resources", std::move(message), OutageProbeKind::Connection};
  if (state == "53400") return {"insufficient_resources", std::move(message), OutageProbeKind::None};
  if (state.starts_with("53")) return {"insufficient_resources", std::move(message), OutageProbeKind::Write};
  if (state.starts_with("58")) return {"database_error", std::move(message), OutageProbeKind::Write};
  return {"database_error", std::move(message), OutageProbeKind::None};
}

}  // namespace

InfrastructureFailure classify_infrastructure_failure(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const DatabaseError& e) {
    if (e.code() == "DATABASE_POOL_TIMEOUT") return {"pool_timeout", e.what(), OutageProbeKind::None};
    if (e.code() == "DATABASE_UNAVAILABLE") return {"connection_lost", e.what(), OutageProbeKind::Connection};
    return from_sqlstate(e.sqlstate(), e.what());
  } catch (const pqxx::broken_connection& e) {
    return {"connection_lost", e.what(), OutageProbeKind::Connection};
  } catch (const pqxx::failure& e) {
    return from_sqlstate(sqlstate_of(e), e.what());
  } catch (const std::exception& e) {
    return {"other", e.what(), OutageProbeKind::None};
  } catch (...) {
    return {"other", "a non-standard exception", OutageProbeKind::None};
  }
}

}  // namespace boxcar::detail
