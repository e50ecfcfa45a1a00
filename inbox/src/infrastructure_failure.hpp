// What went wrong when the database failed before a handler ran: such a failure is not an
// attempt (docs/worker.md, "Attempt accounting"), and is counted by reason in
// boxcar_worker_infrastructure_retries_total.
#pragma once

#include <exception>
#include <string>

namespace boxcar::detail {

struct InfrastructureFailure {
  /// Bounded metric label: pool_timeout, connection_lost, database_error or other.
  std::string reason;
  std::string message;
};

/// Classifies the exception `error` (thrown while acquiring a connection, beginning the
/// transaction, setting its deadline or locking the receipt).
InfrastructureFailure classify_infrastructure_failure(std::exception_ptr error);

}  // namespace boxcar::detail
