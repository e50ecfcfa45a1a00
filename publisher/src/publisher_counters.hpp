// The publisher's running totals: written by the publishing thread, read by stats() on
// any thread.
#pragma once

#include <atomic>
#include <cstdint>

#include "boxcar/publisher/publisher.hpp"

namespace boxcar::detail {

struct PublisherCounters {
  std::atomic<std::uint64_t> claimed{0}, delivered{0}, failed{0}, dead{0}, fatal_errors{0}, producer_restarts{0},
      lease_expired{0}, peak_in_flight_bytes{0};

  PublisherStats snapshot() const {
    return {claimed.load(),      delivered.load(),         failed.load(),        dead.load(),
            fatal_errors.load(), producer_restarts.load(), lease_expired.load(), peak_in_flight_bytes.load()};
  }
};

}  // namespace boxcar::detail
