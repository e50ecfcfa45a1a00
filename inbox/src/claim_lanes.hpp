// One claim lane per owned consumer: within a Worker process, the claims of one consumer
// run one at a time (docs/worker.md, "Claims"). Concurrent claims of one consumer all scan
// the head of the same index and skip each other's locked rows under SKIP LOCKED; sixteen
// handler threads doing so made each claim cost seven times its uncontended time
// (docs/benchmarks.md, "Claim lanes and runs"). Claims of different consumers, and of other
// processes, still run side by side.
//
// The lane also keeps the fair claim's round-robin position: in memory only, a hint of
// where the next claim starts, so a lost or stale cursor (a restart, another process
// claiming the same scopes) changes which scope comes first, never what may be claimed.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "receipt_store.hpp"

namespace boxcar::detail {

class ClaimLanes {
 public:
  explicit ClaimLanes(std::size_t consumers) {
    lanes_.reserve(consumers);
    for (std::size_t i = 0; i < consumers; ++i) lanes_.push_back(std::make_unique<Lane>());
  }

  /// Runs `claim(cursor)` for owned consumer `index` once no other claim of that consumer
  /// runs in this process; `claim` reads and may move the consumer's fair-claim cursor.
  template <typename Claim>
  decltype(auto) run(std::size_t index, Claim&& claim) {
    Lane& lane = *lanes_.at(index);
    std::lock_guard lock(lane.mutex);
    return std::forward<Claim>(claim)(lane.cursor);
  }

 private:
  struct Lane {
    std::mutex mutex;
    ScopeCursor cursor;
  };
  std::vector<std::unique_ptr<Lane>> lanes_;
};

}  // namespace boxcar::detail
