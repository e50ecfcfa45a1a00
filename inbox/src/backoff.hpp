// Retry delays: exponential with full jitter, so a burst of failures spreads out
// instead of retrying in lockstep.
#pragma once

#include <chrono>

#include "boxcar/inbox/worker.hpp"

namespace boxcar::detail {

/// The upper bound for `attempt` (1-based): min(cap, base * 2^(attempt-1)).
std::chrono::milliseconds backoff_ceiling(const BackoffOptions& options, int attempt);

/// A uniformly random delay in [0, backoff_ceiling(options, attempt)].
std::chrono::milliseconds backoff_delay(const BackoffOptions& options, int attempt);

}  // namespace boxcar::detail
