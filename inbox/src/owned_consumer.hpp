// One consumer a Worker owns, with everything the worker keeps about it: its claim lane
// (within one process, the claims of a consumer run one at a time: docs/worker.md,
// "Claims"), the fair claim's round-robin cursor, and the two hints that say when to claim
// for it next.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "receipt_store.hpp"

namespace boxcar::detail {

struct OwnedConsumer {
  explicit OwnedConsumer(std::string consumer_name) : name(std::move(consumer_name)) {}

  const std::string name;

  /// Held while a claim of this consumer runs: concurrent claims of one consumer all scan
  /// the head of the same index and skip each other's locked rows under SKIP LOCKED, so a
  /// process runs them one at a time (docs/benchmarks.md, "Claim lanes and runs"). Claims
  /// of different consumers, and of other processes, run side by side.
  std::mutex lane;
  /// Guarded by `lane`: where the next fair claim starts its round robin over scopes. A
  /// hint in memory only: a lost or stale cursor changes which scope comes first, never
  /// what may be claimed.
  ScopeCursor cursor;

  /// Dispatcher thread only: the next claim round claims for it (a notification named it,
  /// the poll came, or its last claim came back full).
  bool claim_due = true;
  /// Guarded by WorkQueue::mutex: its last claim came back full, so it has a backlog that
  /// idle handler threads may claim from themselves (batch_size > 1).
  bool backlogged = false;
};

using OwnedConsumers = std::vector<std::unique_ptr<OwnedConsumer>>;

}  // namespace boxcar::detail
