// The worker's dispatcher thread: it claims for the owned consumers that something is due
// for (a NOTIFY naming them, the poll, a claim that came back full), feeds the local queue
// while it has room, runs lease recovery every poll interval, opens the suspect lane when
// a suspect is due and then claims the suspects one at a time, each alone in its process
// (docs/worker.md, "Claims", "Wake-ups", "Attempt accounting and the suspect lane").
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/fwd.h>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/inbox/worker.hpp"
#include "claims.hpp"
#include "lease_rescuer.hpp"
#include "owned_consumer.hpp"
#include "receipt_store.hpp"
#include "work_queue.hpp"

namespace boxcar::detail {

class ClaimDispatcher {
 public:
  ClaimDispatcher(std::shared_ptr<ConnectionPool> pool, const WorkerOptions& options, OwnedConsumers& consumers,
                  WorkQueue& work, Claims& claims, ReceiptStore& store, LeaseRescuer& rescuer,
                  std::shared_ptr<spdlog::logger> log);
  ~ClaimDispatcher();
  ClaimDispatcher(const ClaimDispatcher&) = delete;
  ClaimDispatcher& operator=(const ClaimDispatcher&) = delete;

  /// Starts the dispatcher thread; it runs until WorkQueue::stopping.
  void start();
  /// Waits for the thread to end (after WorkQueue::stopping was set and signalled).
  void join();

  /// Lease recovery for every owned consumer: expired claims go back as suspects (or DEAD),
  /// whatever room the queue has. @throws what the statements throw.
  void recover();

 private:
  void run();
  // Returns true when the dispatcher should claim now, false when it must wait for the
  // queue to empty (suspect lane) or leave its loop.
  bool wait_for_room_or_idle(std::chrono::steady_clock::time_point until);
  /// Claims for every owned consumer due a claim, in turn; returns how many it claimed and
  /// sets `found_queue_full` when it stopped for want of room. A consumer whose claim came
  /// back short has nothing more due: it waits for its next notification or poll.
  std::size_t claim_round(bool& found_queue_full);
  /// Puts claims of consumers_[index] on the local queue; `full`: the claim came back
  /// full, so the consumer has a backlog idle handler threads may claim from. Returns how many.
  std::size_t enqueue(std::size_t index, std::vector<ClaimedReceipt>& got, bool full);
  /// The suspect lane, called only while idle: claims one due suspect (round robin over
  /// the owned consumers) and queues it. Returns false when no suspect is due.
  bool claim_suspect();
  void set_suspect_lane(bool open);
  void mark_all_due();
  bool any_due() const;
  /// A notification's payload is its consumer; an empty one (`dead retry`, a hand-written
  /// NOTIFY) stands for every consumer.
  void mark_notified(const std::string& payload);
  bool owns_or_all(const std::string& payload) const;
  void sleep_unless_stopping(std::chrono::milliseconds duration);

  std::shared_ptr<ConnectionPool> pool_;
  const WorkerOptions& options_;
  OwnedConsumers& consumers_;
  WorkQueue& work_;
  Claims& claims_;
  ReceiptStore& store_;
  LeaseRescuer& rescuer_;
  std::shared_ptr<spdlog::logger> log_;
  std::size_t next_consumer_ = 0;
  std::size_t next_suspect_consumer_ = 0;
  std::thread thread_;
};

}  // namespace boxcar::detail
