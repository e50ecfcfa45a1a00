// The probe that tells a database outage from a failure of one statement (docs/worker.md,
// "Infrastructure failures are not attempts"): after a handler's transaction failed with
// an error that looks like the database's, a fresh connection (never a pooled one, whose
// session may be the broken one) either fails the way an outage fails, or shows the
// database healthy, and the failure was the handler's.
#pragma once

#include <string>

#include "infrastructure_failure.hpp"

namespace boxcar::detail {

struct OutageProbeResult {
  /// The database failed the probe as an outage does: the connection could not be opened
  /// or lost, or the probe's statement failed with an outage SQLSTATE.
  bool outage = false;
  /// What the probe found, for the log.
  std::string finding;
};

class OutageProbe {
 public:
  /// How long the probe's connection may take to open (libpq connect_timeout, seconds)
  /// and its statements to run: the probe occupies a handler thread while it runs.
  static constexpr int kConnectTimeoutSeconds = 3;
  static constexpr int kStatementTimeoutMs = 3000;

  /// `connection_string`: the pool's (ConnectionPool::connection_string()), so the probe
  /// reaches the server the way the handler's connection did; `schema`: where the write
  /// probe's function lives.
  OutageProbe(const std::string& connection_string, const std::string& schema);

  /// Runs the probe of `kind` (None: returns no outage at once). Never throws; blocks for
  /// at most about kConnectTimeoutSeconds plus twice kStatementTimeoutMs. Thread-safe.
  /// A probe that fails otherwise (its statement timed out, a privilege is missing)
  /// proves nothing: not an outage.
  OutageProbeResult run(OutageProbeKind kind) const noexcept;

 private:
  std::string connection_string_;
  std::string write_sql_;
};

}  // namespace boxcar::detail
