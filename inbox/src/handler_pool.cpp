// The handler threads' loop, their runs and self-claims, and their abandonment.
#include "handler_pool.hpp"

#include <algorithm>
#include <set>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

#include "boxcar/core/logging.hpp"

namespace boxcar::detail {

namespace {

// A run's handler thread still busy with one message after this long gives the rest of
// its run back to the queue, where idle threads take it: a slow handler delays the
// messages behind it by at most this plus one supervisor period.
constexpr auto kRunStall = std::chrono::milliseconds(100);

// Under the work queue's lock: whether a lease in `waiting` may end before `needed_until`.
bool runs_out_locked(const std::deque<ClaimedReceipt>& waiting, std::chrono::steady_clock::time_point needed_until) {
  return std::any_of(waiting.begin(), waiting.end(), [&](const auto& r) { return r.lease_until < needed_until; });
}

}  // namespace

// One handler thread. Guarded by the work queue's mutex, except `thread`, which only the
// lifecycle (start/stop) and the abandoning thread touch.
struct HandlerPool::Slot {
  std::thread thread;
  std::thread::id id;
  bool busy = false;
  bool abandoned = false;
  // What the thread is processing while busy (its own local batch), read only under the
  // lock and only to describe an abandonment: formatting identities for every message
  // would put string work on the hot path for a rare log line.
  const std::vector<ClaimedReceipt>* batch = nullptr;
  // With batch_size 1: the claims the thread took to run after its current one.
  std::deque<ClaimedReceipt> run;
  // When the thread began its current message (or batch).
  Clock::time_point started;
};

HandlerPool::HandlerPool(const WorkerOptions& options, OwnedConsumers& consumers, WorkQueue& work, Claims& claims,
                         MessageProcessor& processor, InFlightRegistry& in_flight, ReceiptStore& store,
                         std::shared_ptr<ConnectionPool> pool, std::shared_ptr<spdlog::logger> log)
    : options_(options),
      consumers_(consumers),
      work_(work),
      claims_(claims),
      processor_(processor),
      in_flight_(in_flight),
      store_(store),
      pool_(std::move(pool)),
      log_(std::move(log)) {}

void HandlerPool::start_locked(const std::shared_ptr<void>& owner) {
  owner_ = owner;
  for (std::size_t i = 0; i < options_.concurrency; ++i) spawn_locked();
}

// The thread holds the owner and its slot, so it may outlive both stop() and ~Worker once
// abandoned.
void HandlerPool::spawn_locked() {
  auto slot = std::make_shared<Slot>();
  slot->thread = std::thread([this, owner = owner_.lock(), slot] { handle_loop(*slot); });
  slot->id = slot->thread.get_id();
  slots_.push_back(std::move(slot));
}

HandlerPool::Clock::time_point HandlerPool::run_needed_until() const {
  return Clock::now() + options_.handler_timeout + kAbandonAfter;
}

void HandlerPool::handle_loop(Slot& slot) {
  DeadlineWatchdog watchdog;
  for (;;) {
    std::vector<ClaimedReceipt> batch;
    std::optional<std::size_t> self_claim;
    bool run_needs_renewal = false;
    std::size_t queue_level = 0;
    if (!take_work(slot, batch, self_claim, run_needs_renewal, queue_level)) return;
    if (self_claim) {
      bool ended = false;
      if (!finish_self_claim(slot, *self_claim, batch, ended)) {
        if (ended) return;
        continue;
      }
    } else if (queue_level <= work_.refill_level()) {
      work_.room_or_idle.notify_all();  // the dispatcher refills
    }
    if (!run_batch_and_run(slot, batch, run_needs_renewal, watchdog)) return;
  }
}

bool HandlerPool::take_work(Slot& slot, std::vector<ClaimedReceipt>& batch, std::optional<std::size_t>& self_claim,
                            bool& run_needs_renewal, std::size_t& queue_level) {
  std::unique_lock q(work_.mutex);
  work_.work_available.wait(q, [&] {
    return work_.stopping || slot.abandoned || !work_.queue.empty() ||
           (self_claim = work_.backlogged_consumer_locked());
  });
  if (work_.stopping || slot.abandoned) return false;
  take_locked(slot, batch);
  run_needs_renewal = runs_out_locked(slot.run, run_needed_until());
  queue_level = work_.queue.size();
  slot.batch = &batch;
  slot.busy = true;
  slot.started = Clock::now();
  ++work_.busy_threads;
  if (self_claim) ++work_.handler_claims_running;
  return true;
}

bool HandlerPool::finish_self_claim(Slot& slot, std::size_t index, std::vector<ClaimedReceipt>& batch, bool& ended) {
  auto got = claim_for_self(index);
  std::unique_lock q(work_.mutex);
  --work_.handler_claims_running;
  // Claimed while stop() ran: as unstarted as the queue's, so handed back with them.
  if (work_.stopping) {
    auto ready = work_.keep_unstarted_locked(std::move(got));
    got.clear();
    q.unlock();
    claims_.hand_back(ready);
    q.lock();
  }
  if (got.empty() || slot.abandoned) {
    if (!slot.abandoned) {
      slot.batch = nullptr;
      slot.busy = false;
      --work_.busy_threads;
    }
    q.unlock();
    work_.room_or_idle.notify_all();
    ended = slot.abandoned;
    return false;
  }
  batch = std::move(got);  // under the lock: an abandonment may describe it
  return true;
}

bool HandlerPool::run_batch_and_run(Slot& slot, std::vector<ClaimedReceipt>& batch, bool run_needs_renewal,
                                    DeadlineWatchdog& watchdog) {
  std::vector<ClaimedReceipt> unstarted;
  bool idle = false;
  for (;;) {
    if (run_needs_renewal) claims_.renew_running_out(slot.run, run_needed_until());
    processor_.process(batch, watchdog);
    std::lock_guard q(work_.mutex);
    if (slot.abandoned) {
      // Replaced long ago; the attempt's outcome was recorded as a timeout (or went
      // stale) by process(), and its run was handed back. Nothing else of the worker is
      // this thread's any more.
      const Identities ids = describe(batch);
      log_event(*log_, LogLevel::Warn, "an abandoned handler returned; its thread ends",
                {{"consumer", ids.consumers},
                 {"message_id", ids.message_ids},
                 {"receipt_id", ids.receipt_ids},
                 {"attempt", ids.attempts}});
      return false;
    }
    if (!slot.run.empty() && !work_.stopping) {
      batch.clear();
      batch.push_back(std::move(slot.run.front()));
      slot.run.pop_front();
      slot.started = Clock::now();
      run_needs_renewal = runs_out_locked(slot.run, run_needed_until());
      continue;
    }
    // stop() began during the run: the rest was never started.
    if (work_.stopping)
      unstarted = work_.keep_unstarted_locked(
          {std::make_move_iterator(slot.run.begin()), std::make_move_iterator(slot.run.end())});
    slot.run.clear();
    slot.batch = nullptr;
    slot.busy = false;
    idle = --work_.busy_threads == 0;
    break;
  }
  claims_.hand_back(unstarted);
  // Only an idle process matters to the waiters: the suspect lane and stop().
  if (idle) work_.room_or_idle.notify_all();
  return true;
}

// With batch_size > 1, a batch. With batch_size 1, one message, and as many more to run
// after it (up to kRunLength in all) as the queue holds for every handler thread; a
// shallow queue gives one each, so no message waits behind another while a thread is idle.
void HandlerPool::take_locked(Slot& slot, std::vector<ClaimedReceipt>& batch) {
  const auto take = [&] {
    auto r = std::move(work_.queue.front());
    work_.queue.pop_front();
    return r;
  };
  if (options_.batch_size > 1) {
    while (!work_.queue.empty() && batch.size() < options_.batch_size) batch.push_back(take());
    return;
  }
  if (work_.queue.empty()) return;
  const std::size_t run = std::clamp<std::size_t>(work_.queue.size() / options_.concurrency, 1, kRunLength);
  batch.push_back(take());
  while (slot.run.size() + 1 < run) slot.run.push_back(take());
}

std::vector<ClaimedReceipt> HandlerPool::claim_for_self(std::size_t index) {
  OwnedConsumer& consumer = *consumers_[index];
  const std::size_t limit = std::min(options_.batch_size, options_.claim_limit);
  std::vector<ClaimedReceipt> got;
  try {
    ++handler_thread_claims_;
    got = claims_.claim(consumer, limit);
  } catch (const std::exception& e) {
    log_->warn("a handler thread's claim for '{}' failed; the dispatcher claims instead: {}", consumer.name, e.what());
  }
  claims_.count_claimed(consumer.name, got);
  std::lock_guard q(work_.mutex);
  if (got.size() < limit) consumer.backlogged = false;
  return got;
}

bool HandlerPool::requeue_stalled_runs_locked(Clock::time_point now) {
  bool requeued = false;
  if (work_.stopping) return requeued;
  for (const auto& slot : slots_) {
    if (!slot->busy || slot->run.empty() || now - slot->started < kRunStall) continue;
    for (auto it = slot->run.rbegin(); it != slot->run.rend(); ++it) work_.queue.push_front(std::move(*it));
    slot->run.clear();
    requeued = true;
  }
  return requeued;
}

std::vector<HandlerPool::Abandonment> HandlerPool::abandon_overdue(Clock::time_point cutoff) {
  std::vector<Abandonment> abandoned;
  for (const auto id : in_flight_.overdue(cutoff)) {
    std::lock_guard q(work_.mutex);
    const auto it = std::find_if(slots_.begin(), slots_.end(), [&](const auto& s) { return s->id == id; });
    if (it == slots_.end()) continue;  // not a handler thread of ours (drain())
    // Only while the attempt is still running: it may have returned meanwhile.
    auto attempt = in_flight_.abandon(id, [&](pqxx::connection& c) { pool_->abandon_loan(c); });
    if (!attempt) continue;
    abandoned.push_back(abandon_locked(*it, "its deadline", attempt));
    if (!work_.stopping) spawn_locked();
  }
  return abandoned;
}

std::vector<HandlerPool::Abandonment> HandlerPool::abandon_busy_locked(const std::string& cause) {
  std::vector<Abandonment> abandoned;
  for (const auto& slot : std::vector(slots_))
    if (slot->busy)
      abandoned.push_back(abandon_locked(
          slot, cause, in_flight_.abandon(slot->id, [&](pqxx::connection& c) { pool_->abandon_loan(c); })));
  return abandoned;
}

// Under the lock, for a busy slot: its thread is no longer the worker's. `attempt` is its
// running attempt, already marked abandoned in the registry, whose connection stopped
// counting in the pool while the registry guaranteed it was alive.
HandlerPool::Abandonment HandlerPool::abandon_locked(const std::shared_ptr<Slot>& slot, std::string cause,
                                                     std::optional<InFlightRegistry::Abandoned> attempt) {
  // The slot's batch is alive here: its thread is busy and cannot leave the batch's scope
  // without taking the lock, which we hold.
  Abandonment a{.identities = slot->batch ? describe(*slot->batch) : Identities{},
                .cause = std::move(cause),
                .attempt = attempt,
                .unstarted = {std::make_move_iterator(slot->run.begin()), std::make_move_iterator(slot->run.end())}};
  slot->run.clear();
  slot->abandoned = true;
  if (slot->busy) --work_.busy_threads;
  slot->thread.detach();
  slots_.erase(std::find(slots_.begin(), slots_.end(), slot));
  ++abandoned_total_;
  return a;
}

HandlerPool::Identities HandlerPool::describe(const std::vector<ClaimedReceipt>& batch) {
  Identities ids;
  std::set<std::string> consumers;
  for (const auto& r : batch) {
    const std::string sep = ids.message_ids.empty() ? "" : ",";
    if (consumers.insert(r.consumer).second) ids.consumers += (ids.consumers.empty() ? "" : ",") + r.consumer;
    ids.message_ids += sep + r.message_id;
    ids.receipt_ids += sep + std::to_string(r.id);
    ids.attempts += sep + std::to_string(r.attempt);
  }
  return ids;
}

void HandlerPool::report(Abandonment& a) {
  claims_.hand_back_unstarted(std::move(a.unstarted));
  if (options_.metrics) options_.metrics->abandoned_handler();
  std::string session = "no transaction open";
  if (a.attempt && a.attempt->session.backend_pid != 0) {
    try {
      const bool terminated = store_.terminate_backend(a.attempt->session);
      session = terminated ? "session terminated" : "session already gone";
    } catch (const std::exception& e) {
      session = std::string("could not terminate its session: ") + e.what();
    }
  }
  const Identities& ids = a.identities;
  log_event(*log_, LogLevel::Error,
            "handler thread abandoned: its handler ignored cancellation past " + a.cause +
                "; a new thread replaces it and lease recovery retries the receipt",
            {{"outcome", "abandoned"},
             {"consumer", ids.consumers},
             {"message_id", ids.message_ids},
             {"receipt_id", ids.receipt_ids},
             {"attempt", ids.attempts},
             {"session", session}});
}

void HandlerPool::join_all() {
  for (auto& slot : slots_) slot->thread.join();
  slots_.clear();
}

}  // namespace boxcar::detail
