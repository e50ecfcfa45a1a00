// What went wrong when the database failed, before a handler ran or under it: a failure
// before the handler is not an attempt, and one under it is not an attempt when a probe
// confirms that the database itself is out (docs/worker.md, "Infrastructure failures are
// not attempts"). Counted by reason in boxcar_worker_infrastructure_retries_total.
#pragma once

#include <exception>
#include <string>

namespace boxcar::detail {

/// How to find out whether a failure that looks like the database's is one: which probe
/// (outage_probe.hpp) fails while the database is out, and passes while only the
/// statement that raised the error failed.
enum class OutageProbeKind {
  /// The failure belongs to the statement (or to the handler): no probe, an attempt.
  None,
  /// The connection lost or refused (SQLSTATE class 08, a broken connection), the server
  /// shutting down or starting (57P01-57P03), out of memory (53200) or of connections
  /// (53300): a fresh connection that runs a trivial statement.
  Connection,
  /// Out of disk (53100, 53000) or failing its I/O (class 58): a write that must allocate
  /// new space. `SELECT 1` still passes on a full disk.
  Write,
};

struct InfrastructureFailure {
  /// Bounded metric label: pool_timeout, connection_lost, insufficient_resources,
  /// database_error or other.
  std::string reason;
  std::string message;
  /// What proves it an outage of the database rather than a failure of the statement.
  /// 53400 (configuration_limit_exceeded: temp_file_limit and the like) is always the
  /// statement's own limit: None.
  OutageProbeKind probe = OutageProbeKind::None;
};

/// Classifies the exception `error` (thrown while acquiring a connection, beginning the
/// transaction, setting its deadline, locking the receipt, or by a handler's statements).
InfrastructureFailure classify_infrastructure_failure(std::exception_ptr error);

}  // namespace boxcar::detail
