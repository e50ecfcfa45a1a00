// Retry delays: exponential with full jitter, so a burst of failures spreads out
// instead of retrying in lockstep. Used by the worker and the publisher.
#pragma once

#include <chrono>

namespace boxcar {

struct BackoffOptions {
  /// Upper bound of the first retry's delay; doubles per attempt ("full jitter": the
  /// actual delay is uniform in [0, min(cap, base * 2^(attempt-1))]).
  std::chrono::milliseconds base{1000};
  std::chrono::milliseconds cap{std::chrono::minutes(5)};
};

/// The upper bound for `attempt` (1-based): min(cap, base * 2^(attempt-1)).
std::chrono::milliseconds backoff_ceiling(const BackoffOptions& options, int attempt);

/// A uniformly random delay in [0, backoff_ceiling(options, attempt)]. Thread-safe.
std::chrono::milliseconds backoff_delay(const BackoffOptions& options, int attempt);

}  // namespace boxcar
