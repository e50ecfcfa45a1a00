// Supervision and shutdown of a Worker's threads. While the worker runs, the supervisor
// thread puts the runs behind slow handlers back on the queue and abandons (and replaces)
// the threads of handlers that ignore their deadline. At stop() it takes the worker down
// in order: stop claiming, hand back what never started, signal the handlers, wait out the
// grace, cancel their queries, abandon what still runs (docs/worker.md, "Shutdown").
#pragma once

#include <chrono>
#include <memory>
#include <thread>

#include <spdlog/fwd.h>

#include "boxcar/inbox/worker.hpp"
#include "claim_dispatcher.hpp"
#include "claims.hpp"
#include "handler_pool.hpp"
#include "in_flight_registry.hpp"
#include "work_queue.hpp"

namespace boxcar::detail {

class Supervisor {
 public:
  Supervisor(const WorkerOptions& options, WorkQueue& work, HandlerPool& handlers, ClaimDispatcher& dispatcher,
             Claims& claims, InFlightRegistry& in_flight, std::shared_ptr<spdlog::logger> log);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  /// Starts the supervisor thread (WorkQueue::supervising must be set).
  void start();
  /// The graceful stop. Returns within shutdown_grace + 2 s, plus the claim statement and
  /// hand-back in progress. Call once per start().
  void shut_down();

 private:
  void run();
  /// Hands back what is queued, once no claim can take it again.
  void hand_back_queue();
  /// Waits up to shutdown_grace for the handlers (their signals fired), then cancels
  /// their queries and waits up to kCancelWait more; returns the threads still busy, given up.
  std::vector<HandlerPool::Abandonment> wait_for_handlers();

  const WorkerOptions& options_;
  WorkQueue& work_;
  HandlerPool& handlers_;
  ClaimDispatcher& dispatcher_;
  Claims& claims_;
  InFlightRegistry& in_flight_;
  std::shared_ptr<spdlog::logger> log_;
  std::thread thread_;
};

}  // namespace boxcar::detail
