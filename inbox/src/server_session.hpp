// The server session and transaction that run a handler attempt, as the server named them
// in the attempt's lock statement (worker_queries.hpp, kLock): what terminating an
// abandoned attempt must match, and nothing else. libpq's backendpid() is not it behind
// PgBouncer, which gives every client a pid of its own.
#pragma once

#include <cstdint>

namespace boxcar::detail {

struct ServerSession {
  /// pg_backend_pid() of the attempt's session; 0 when unknown.
  int backend_pid = 0;
  /// The start of the attempt's transaction (its now(), pg_stat_activity.xact_start) in
  /// microseconds since the Unix epoch.
  std::int64_t xact_start_us = 0;
};

}  // namespace boxcar::detail
