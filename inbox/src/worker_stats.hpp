// The worker's outcome counters, updated by every role, read by Worker::stats().
#pragma once

#include <atomic>
#include <cstdint>

#include "boxcar/inbox/worker.hpp"

namespace boxcar::detail {

struct AtomicWorkerStats {
  std::atomic<std::uint64_t> claimed{0}, completed{0}, retried{0}, dead{0}, stale{0}, unsupported{0}, lease_expired{0},
      handed_back{0}, handler_calls{0}, crash_strikes{0}, infrastructure_retries{0};
  WorkerStats snapshot() const;
};

}  // namespace boxcar::detail
