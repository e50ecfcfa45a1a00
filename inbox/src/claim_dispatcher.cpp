// The dispatcher's loop: wait for room, claim for what is due, sleep on LISTEN when idle.
#include "claim_dispatcher.hpp"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "boxcar/core/detail/wakeup_listener.hpp"
#include "boxcar/inbox/inbox.hpp"

namespace boxcar::detail {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

ClaimDispatcher::ClaimDispatcher(std::shared_ptr<ConnectionPool> pool, const WorkerOptions& options,
                                 OwnedConsumers& consumers, WorkQueue& work, Claims& claims, ReceiptStore& store,
                                 LeaseRescuer& rescuer, std::shared_ptr<spdlog::logger> log)
    : pool_(std::move(pool)),
      options_(options),
      consumers_(consumers),
      work_(work),
      claims_(claims),
      store_(store),
      rescuer_(rescuer),
      log_(std::move(log)) {}

ClaimDispatcher::~ClaimDispatcher() { join(); }

void ClaimDispatcher::start() {
  thread_ = std::thread([this] { run(); });
}

void ClaimDispatcher::join() {
  if (thread_.joinable()) thread_.join();
}

// Claims only for consumers with something due: a notification naming an owned consumer
// wakes the loop for that consumer alone (other consumers' notifications are ignored
// inside the listener), and every poll_interval the lease recovery tick polls them all
// (docs/worker.md, "Wake-ups").
void ClaimDispatcher::run() {
  WakeupListener wakeups(pool_->session_connection_string(), Inbox::notify_channel(options_.schema), log_);
  auto next_recovery = Clock::now();
  mark_all_due();
  while (wait_for_room_or_idle(next_recovery)) {
    // Newly listening: whatever was accepted before LISTEN sent no wake-up we can see.
    if (wakeups.ensure_listening()) mark_all_due();
    bool found_queue_full = false;
    try {
      if (Clock::now() >= next_recovery) {
        next_recovery = Clock::now() + options_.poll_interval;
        recover();
        // Until the tick after next, whatever a claim waits for in the queue.
        claims_.renew_running_out(work_.queue, Clock::now() + 2 * options_.poll_interval);
        mark_all_due();  // the poll: retries whose backoff ended send no notification
      }
      if (work_.suspect_lane) {
        bool idle;
        {
          std::lock_guard q(work_.mutex);
          idle = work_.idle_locked();
        }
        // Not idle yet: claim nothing, wait for the queue and handlers to empty. Idle:
        // run the next suspect alone, or leave the lane when none is due.
        if (!idle || claim_suspect()) continue;
        set_suspect_lane(false);
      }
      claim_round(found_queue_full);
    } catch (const std::exception& e) {
      log_->error("claiming failed, retrying after {} ms: {}", options_.poll_interval.count(), e.what());
      sleep_unless_stopping(options_.poll_interval);
      continue;
    }
    // A consumer left with more to claim (a full claim, or a round stopped for want of
    // room): back to waiting for room. A round that found the queue full must not idle
    // below even if a handler has taken from the queue since, or the handlers would
    // drain it and then wait for a poll.
    if (found_queue_full || any_due()) continue;
    // Idle: sleep until a NOTIFY for an owned consumer arrives or the poll interval
    // passes; never busy-loop.
    const auto woke = wakeups.wait_until(
        std::min(next_recovery, Clock::now() + options_.poll_interval),
        [&] {
          std::lock_guard q(work_.mutex);
          return work_.stopping;
        },
        [&](const std::string& payload) { return owns_or_all(payload); });
    if (woke.may_have_missed) mark_all_due();
    for (const auto& payload : woke.payloads) mark_notified(payload);
  }
}

// A full queue waits for room, the suspect lane for an idle process; neither waits past
// the next lease recovery. False once stop() has begun.
bool ClaimDispatcher::wait_for_room_or_idle(Clock::time_point until) {
  std::unique_lock q(work_.mutex);
  work_.room_or_idle.wait_until(q, until, [&] {
    return work_.stopping || (work_.suspect_lane ? work_.idle_locked() : work_.queue.size() <= work_.refill_level());
  });
  return !work_.stopping;
}

std::size_t ClaimDispatcher::claim_round(bool& found_queue_full) {
  std::size_t claimed = 0;
  found_queue_full = false;
  for (std::size_t i = 0; i < consumers_.size(); ++i) {
    const std::size_t index = (next_consumer_ + i) % consumers_.size();
    OwnedConsumer& consumer = *consumers_[index];
    if (!consumer.claim_due) continue;
    std::size_t room;
    {
      std::lock_guard q(work_.mutex);
      if (work_.stopping) return claimed;
      room = work_.capacity() > work_.queue.size() ? work_.capacity() - work_.queue.size() : 0;
    }
    if (room == 0) {
      found_queue_full = true;
      break;
    }
    const std::size_t limit = std::min(room, options_.claim_limit);
    auto got = claims_.claim(consumer, limit);
    // Short means nothing more is due, for the fair claim too: it fills a short share
    // with the oldest due receipts.
    if (got.size() < limit) consumer.claim_due = false;
    claimed += enqueue(index, got, got.size() == limit);
  }
  next_consumer_ = (next_consumer_ + 1) % consumers_.size();
  return claimed;
}

std::size_t ClaimDispatcher::enqueue(std::size_t index, std::vector<ClaimedReceipt>& got, bool full) {
  OwnedConsumer& consumer = *consumers_[index];
  claims_.count_claimed(consumer.name, got);
  {
    std::lock_guard q(work_.mutex);
    consumer.backlogged = full;
    for (auto& r : got) work_.queue.push_back(std::move(r));
  }
  work_.work_available.notify_all();
  return got.size();
}

bool ClaimDispatcher::claim_suspect() {
  for (std::size_t i = 0; i < consumers_.size(); ++i) {
    const std::size_t index = (next_suspect_consumer_ + i) % consumers_.size();
    auto suspect = store_.claim_suspect(consumers_[index]->name, options_.lease);
    if (!suspect) continue;
    next_suspect_consumer_ = (index + 1) % consumers_.size();
    std::vector<ClaimedReceipt> one;
    one.push_back(std::move(*suspect));
    enqueue(index, one, false);
    return true;
  }
  return false;
}

// The dispatcher is the only writer of the suspect lane and writes under the mutex, so it
// may read the flag without the lock; handler threads read it under the lock.
void ClaimDispatcher::set_suspect_lane(bool open) {
  {
    std::lock_guard q(work_.mutex);
    work_.suspect_lane = open;
  }
  // Closing it lets idle handler threads claim a backlog for themselves again.
  if (!open) work_.work_available.notify_all();
}

void ClaimDispatcher::recover() {
  for (const auto& consumer : consumers_) {
    rescuer_.release_expired(consumer->name);
    if (!work_.suspect_lane && store_.suspect_due(consumer->name)) set_suspect_lane(true);
  }
}

void ClaimDispatcher::mark_all_due() {
  for (auto& consumer : consumers_) consumer->claim_due = true;
}

bool ClaimDispatcher::any_due() const {
  return std::any_of(consumers_.begin(), consumers_.end(), [](const auto& c) { return c->claim_due; });
}

void ClaimDispatcher::mark_notified(const std::string& payload) {
  if (payload.empty()) return mark_all_due();
  for (auto& consumer : consumers_)
    if (consumer->name == payload) consumer->claim_due = true;
}

bool ClaimDispatcher::owns_or_all(const std::string& payload) const {
  return payload.empty() ||
         std::any_of(consumers_.begin(), consumers_.end(), [&](const auto& c) { return c->name == payload; });
}

void ClaimDispatcher::sleep_unless_stopping(std::chrono::milliseconds duration) {
  std::unique_lock q(work_.mutex);
  work_.room_or_idle.wait_for(q, duration, [&] { return work_.stopping; });
}

}  // namespace boxcar::detail
