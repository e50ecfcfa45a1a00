// What went wrong when the database failed before a handler ran: such a failure is not an
// attempt (docs/worker.md, "Attempt accounting"), and is counted by reason in
// boxcar_worker_infrastructure_retries_total.
#pragma once

#include <exception>
#include <string>

namespace boxcar::detail {

struct InfrastructureFailure {
  /// Bounded metric label: pool_timeout, connection_lost, insufficient_resources,
  /// database_error or other.
  std::string reason;
  std::string message;
  /// The database itself failed (connection lost, out of resources, shutting down, I/O),
  /// not the statement: see is_database_outage().
  bool outage = false;
};

/// Classifies the exception `error` (thrown while acquiring a connection, beginning the
/// transaction, setting its deadline or locking the receipt).
InfrastructureFailure classify_infrastructure_failure(std::exception_ptr error);

/// True when `error`, thrown while a handler ran, is the database failing rather than the
/// handler: the connection lost (SQLSTATE class 08, a broken connection), a server out of
/// resources (class 53: disk full, out of memory, too many connections), shutting down
/// (57P01-57P03) or failing its I/O (class 58). Such an attempt is given back unspent, like
/// a failure before the handler ran, so an outage cannot drive messages DEAD.
bool is_database_outage(std::exception_ptr error);

}  // namespace boxcar::detail
