// The outage probe: a fresh connection, a trivial statement, and for the disk classes a
// write that must allocate a new page (worker_queries.hpp, kOutageProbeSession and
// kOutageProbeWrite).
#include "outage_probe.hpp"

#include <pqxx/pqxx>

#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/detail/with_schema.hpp"
#include "worker_queries.hpp"

namespace boxcar::detail {
namespace {

// `conninfo` with the probe's own connect_timeout: libpq takes the last value a parameter
// is given, in URLs and key=value strings alike, so this overrides the pool's.
std::string with_probe_timeout(const std::string& conninfo) {
  const std::string parameter = "connect_timeout=" + std::to_string(OutageProbe::kConnectTimeoutSeconds);
  const bool is_url = conninfo.starts_with("postgresql://") || conninfo.starts_with("postgres://");
  if (!is_url) return conninfo + (conninfo.empty() ? "" : " ") + parameter;
  return conninfo + (conninfo.find('?') == std::string::npos ? "?" : "&") + parameter;
}

}  // namespace

OutageProbe::OutageProbe(const std::string& connection_string, const std::string& schema)
    : connection_string_(with_probe_timeout(connection_string)),
      write_sql_(with_schema(worker_sql::kOutageProbeWrite, schema)) {}

OutageProbeResult OutageProbe::run(OutageProbeKind kind) const noexcept {
  if (kind == OutageProbeKind::None) return {false, "not an outage SQLSTATE: no probe"};
  const char* step = "connecting";
  bool connected = false;
  try {
    const auto connection = open_connection(connection_string_);
    connected = true;
    pqxx::nontransaction statement(*connection);
    step = "running a trivial statement";
    statement.exec_params(worker_sql::kOutageProbeSession, std::to_string(kStatementTimeoutMs));
    if (kind == OutageProbeKind::Write) {
      step = "writing a new page";
      statement.exec(write_sql_);
    }
    return {false, "the probe passed: the database is up"};
  } catch (...) {
    const InfrastructureFailure failure = classify_infrastructure_failure(std::current_exception());
    // A connection that could not be opened is an outage whatever libpq said; a statement
    // that failed is one only with an outage SQLSTATE.
    const bool outage = !connected || failure.probe != OutageProbeKind::None;
    return {outage, std::string("the probe failed ") + step + ": " + failure.message};
  }
}

}  // namespace boxcar::detail
