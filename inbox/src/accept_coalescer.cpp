// Leader/follower group commit for Inbox::accept() (see accept_coalescer.hpp).
#include "accept_coalescer.hpp"

#include <algorithm>
#include <unordered_set>
#include <utility>

namespace boxcar::detail {
namespace {

// Ends the caller's flush however it leaves (receipt or exception).
template <typename F>
class OnExit {
 public:
  explicit OnExit(F f) : f_(std::move(f)) {}
  ~OnExit() { f_(); }
  OnExit(const OnExit&) = delete;
  OnExit& operator=(const OnExit&) = delete;

 private:
  F f_;
};

}  // namespace

AcceptCoalescer::AcceptCoalescer(Limits limits, RunGroup run_group)
    : limits_(limits), run_group_(std::move(run_group)) {}

Receipt AcceptCoalescer::accept(const PreparedRequest& request, std::size_t bytes, const RunAlone& run_alone) {
  std::unique_lock lock(mutex_);
  const auto waiter = [&] {
    return Waiter{.request = &request, .identity_key = request.identity_key(), .bytes = bytes, .wake = {}};
  };
  if (flushes_ < limits_.max_flushes) {
    ++flushes_;  // a slot is free, and so nobody is queued
    const auto now = Clock::now();
    if (busy_locked(now)) {
      Waiter self = waiter();
      return lead(self, lock, run_alone);
    }
    // Idle: run at once, on the single-row path.
    ++stats_.alone_calls;
    lock.unlock();
    const OnExit end([this, now] { hand_off(1, now); });
    return run_alone();
  }

  Waiter self = waiter();
  queue_.push_back(&self);
  stats_.waiting = queue_.size();
  if (gathering_) gathered_.notify_all();
  self.wake.wait(lock, [&] { return self.done || self.leading; });
  if (self.done) {
    if (self.error) std::rethrow_exception(self.error);
    return *self.receipt;
  }
  // A flush ended and handed its slot to this waiter: it leads the next group.
  return lead(self, lock, run_alone);
}

Receipt AcceptCoalescer::lead(Waiter& self, std::unique_lock<std::mutex>& lock, const RunAlone& run_alone) {
  gather_locked(lock);
  const std::vector<Waiter*> group = take_group(self);
  const auto started = Clock::now();
  if (group.size() == 1) ++stats_.alone_calls;
  lock.unlock();
  bool handed_off = false;
  const OnExit end([&] {
    if (!handed_off) hand_off(group.size(), started);
  });
  if (group.size() == 1) return run_alone();
  std::optional<Receipt> own;
  std::exception_ptr own_error;
  run_group(group, own, own_error, handed_off, started);
  if (own_error) std::rethrow_exception(own_error);
  return *own;
}

void AcceptCoalescer::gather_locked(std::unique_lock<std::mutex>& lock) {
  const std::size_t wanted = std::min(last_calls_, limits_.max_items);
  const auto enough = [&] { return queue_.size() + 1 >= wanted; };
  if (enough()) return;
  const auto longest = std::min<Clock::duration>(limits_.max_gather, last_took_);
  gathering_ = true;
  gathered_.wait_until(lock, Clock::now() + longest, enough);
  gathering_ = false;
}

bool AcceptCoalescer::busy_locked(Clock::time_point now) const {
  return last_calls_ > 1 && now - last_end_ < limits_.busy_window;
}

std::vector<AcceptCoalescer::Waiter*> AcceptCoalescer::take_group(Waiter& leader) {
  std::vector<Waiter*> group{&leader};
  std::unordered_set<std::string_view> identities{leader.identity_key};
  std::size_t bytes = leader.bytes;
  for (auto it = queue_.begin(); it != queue_.end() && group.size() < limits_.max_items;) {
    Waiter* w = *it;
    // Two calls of one identity in one transaction would share one receipt row and one
    // outcome; the later waits for the next group and sees the earlier's result there.
    if (identities.contains(w->identity_key) || bytes + w->bytes > limits_.max_bytes) {
      ++it;
      continue;
    }
    group.push_back(w);
    identities.insert(w->identity_key);
    bytes += w->bytes;
    it = queue_.erase(it);
  }
  stats_.waiting = queue_.size();
  return group;
}

void AcceptCoalescer::run_group(const std::vector<Waiter*>& group, std::optional<Receipt>& own,
                                std::exception_ptr& own_error, bool& handed_off, Clock::time_point started) {
  // The callers block until their outcome is delivered: their prepared requests outlive this.
  std::vector<const PreparedRequest*> requests;
  requests.reserve(group.size());
  for (const Waiter* w : group) requests.push_back(w->request);

  std::vector<AcceptResult> results;
  std::exception_ptr group_error;
  std::optional<InboxStorageError> storage_error;
  try {
    results = run_group_(requests);
    if (results.size() != group.size()) throw std::logic_error("accept_many returned a result count unlike its batch");
  } catch (const InboxStorageError& e) {
    storage_error.emplace(e);  // each caller gets a copy of its own to throw
  } catch (...) {
    group_error = std::current_exception();
  }

  const auto outcome = [&](std::size_t i, std::optional<Receipt>& receipt, std::exception_ptr& error) {
    if (storage_error) {
      error = std::make_exception_ptr(InboxStorageError(*storage_error));
    } else if (group_error) {
      error = group_error;
    } else if (results[i].ok()) {
      receipt = results[i].receipt();
    } else {
      error = results[i].error();  // this call's own conflict: its neighbours are unaffected
    }
  };
  outcome(0, own, own_error);

  std::lock_guard lock(mutex_);
  // The next flush first: its leader starts while this group's callers wake.
  hand_off_locked(group.size(), started);
  handed_off = true;
  ++stats_.groups;
  stats_.grouped_calls += group.size();
  if (group.size() > stats_.largest_group) stats_.largest_group = group.size();
  for (std::size_t i = 1; i < group.size(); ++i) {
    Waiter& w = *group[i];
    outcome(i, w.receipt, w.error);
    w.done = true;
    // Under the mutex: the waiter (on its caller's stack) cannot return before this.
    w.wake.notify_one();
  }
}

void AcceptCoalescer::hand_off(std::size_t calls, Clock::time_point started) {
  std::lock_guard lock(mutex_);
  hand_off_locked(calls, started);
}

void AcceptCoalescer::hand_off_locked(std::size_t calls, Clock::time_point started) {
  last_end_ = Clock::now();
  last_calls_ = calls;
  last_took_ = last_end_ - started;
  if (queue_.empty()) {
    --flushes_;
    return;
  }
  // The slot passes to the longest waiter, out of the queue: no other leader takes it.
  Waiter& next = *queue_.front();
  queue_.pop_front();
  stats_.waiting = queue_.size();
  next.leading = true;
  next.wake.notify_one();
}

GroupCommitStats AcceptCoalescer::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

}  // namespace boxcar::detail
