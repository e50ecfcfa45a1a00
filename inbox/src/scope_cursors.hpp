// The fair claim's round-robin position per owned consumer (docs/worker.md, "Claims").
// Kept in memory only: it is a hint of where the next claim starts, so a lost or stale
// cursor (a restart, another process claiming the same scopes) changes which scope comes
// first, never what may be claimed. Shared by the dispatcher and the handler threads'
// own claims.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include "receipt_store.hpp"

namespace boxcar::detail {

class ScopeCursors {
 public:
  explicit ScopeCursors(std::size_t consumers) : cursors_(consumers) {}

  ScopeCursor at(std::size_t consumer) const {
    std::lock_guard lock(mutex_);
    return cursors_[consumer];
  }
  void set(std::size_t consumer, ScopeCursor cursor) {
    std::lock_guard lock(mutex_);
    cursors_[consumer] = std::move(cursor);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<ScopeCursor> cursors_;
};

}  // namespace boxcar::detail
