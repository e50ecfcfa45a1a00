// The supervisor's loop and the shutdown sequence.
#include "supervisor.hpp"

#include <spdlog/spdlog.h>

namespace boxcar::detail {

namespace {

using Clock = std::chrono::steady_clock;
// How often the supervisor looks for stalled runs and handlers past their deadline.
constexpr auto kSupervisePeriod = std::chrono::milliseconds(100);
// After the shutdown grace, how long stop() waits for handlers whose queries it cancelled
// before abandoning them.
constexpr auto kCancelWait = std::chrono::seconds(2);

}  // namespace

Supervisor::Supervisor(const WorkerOptions& options, WorkQueue& work, HandlerPool& handlers,
                       ClaimDispatcher& dispatcher, Claims& claims, InFlightRegistry& in_flight,
                       std::shared_ptr<spdlog::logger> log)
    : options_(options),
      work_(work),
      handlers_(handlers),
      dispatcher_(dispatcher),
      claims_(claims),
      in_flight_(in_flight),
      log_(std::move(log)) {}

Supervisor::~Supervisor() {
  if (thread_.joinable()) thread_.join();
}

void Supervisor::start() {
  thread_ = std::thread([this] { run(); });
}

void Supervisor::run() {
  for (;;) {
    bool requeued;
    {
      std::unique_lock q(work_.mutex);
      work_.supervisor_wakeup.wait_for(q, kSupervisePeriod, [&] { return !work_.supervising; });
      if (!work_.supervising) return;
      requeued = handlers_.requeue_stalled_runs_locked(Clock::now());
    }
    if (requeued) work_.work_available.notify_all();
    auto abandoned = handlers_.abandon_overdue(Clock::now() - HandlerPool::kAbandonAfter);
    if (abandoned.empty()) continue;
    work_.room_or_idle.notify_all();
    for (auto& a : abandoned) handlers_.report(a);
  }
}

void Supervisor::shut_down() {
  {
    std::lock_guard q(work_.mutex);
    work_.stopping = true;
  }
  work_.work_available.notify_all();
  work_.room_or_idle.notify_all();
  dispatcher_.join();
  hand_back_queue();
  in_flight_.cancel_signals();
  // A handler that ignored the signal and the cancelled query would keep join() waiting
  // forever: give its thread up, like the supervisor does at a deadline.
  auto abandoned = wait_for_handlers();
  work_.work_available.notify_all();
  work_.room_or_idle.notify_all();
  work_.supervisor_wakeup.notify_all();
  for (auto& a : abandoned) handlers_.report(a);
  thread_.join();
  handlers_.join_all();
  std::vector<ClaimedReceipt> kept;
  {
    // Kept for a claim that never ended: its thread was abandoned, and the leases of
    // whatever it claims expire.
    std::lock_guard q(work_.mutex);
    kept = std::exchange(work_.unstarted_at_stop, {});
  }
  claims_.hand_back(kept);
}

void Supervisor::hand_back_queue() {
  std::vector<ClaimedReceipt> ready;
  {
    std::lock_guard q(work_.mutex);  // with the dispatcher's last claim, if it pushed one
    work_.dispatcher_claiming = false;
    ready = work_.keep_unstarted_locked(
        {std::make_move_iterator(work_.queue.begin()), std::make_move_iterator(work_.queue.end())});
    work_.queue.clear();
  }
  claims_.hand_back(ready);
}

std::vector<HandlerPool::Abandonment> Supervisor::wait_for_handlers() {
  {
    std::unique_lock q(work_.mutex);
    work_.room_or_idle.wait_until(q, Clock::now() + options_.shutdown_grace, [&] { return work_.busy_threads == 0; });
  }
  if (in_flight_.size() > 0) {
    log_->warn("shutdown grace of {} ms over: cancelling {} in-flight handler transactions",
               options_.shutdown_grace.count(), in_flight_.size());
    in_flight_.cancel_queries();
  }
  std::unique_lock q(work_.mutex);
  work_.room_or_idle.wait_until(q, Clock::now() + kCancelWait, [&] { return work_.busy_threads == 0; });
  auto abandoned = handlers_.abandon_busy_locked("the shutdown grace");
  work_.supervising = false;
  return abandoned;
}

}  // namespace boxcar::detail
