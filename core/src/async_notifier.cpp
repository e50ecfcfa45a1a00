// The background sender of coalesced NOTIFY wake-ups.
#include <pqxx/pqxx>

#include "boxcar/core/detail/async_notifier.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/detail/pg_array.hpp"
#include "core_queries.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

namespace boxcar::detail {

AsyncNotifier::AsyncNotifier(std::string connection_string, std::string channel, std::chrono::microseconds min_interval,
                             std::chrono::microseconds max_interval)
    : connection_string_(std::move(connection_string)),
      channel_(std::move(channel)),
      min_interval_(min_interval),
      max_interval_(std::max(min_interval, max_interval)),
      interval_(min_interval_),
      last_send_(Clock::now() - max_interval_) {
  thread_ = std::thread([this] { run(); });
}

AsyncNotifier::~AsyncNotifier() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void AsyncNotifier::notify(const std::string& payload) {
  {
    std::lock_guard lock(mutex_);
    ++marks_;
    if (!pending_.insert(payload).second || thread_waits_ != ThreadWait::ForKeys) return;
  }
  wake_.notify_one();
}

std::optional<AsyncNotifier::Ride> AsyncNotifier::begin_ride(std::span<const std::string> own) {
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  // Not due: the writer marks its keys after its commit (notify()), which counts them.
  if (sending_ || now < last_send_ + interval_) return std::nullopt;
  marks_ += own.size();
  start_send_locked(now);
  sending_ = true;
  Ride ride{.payloads = {}, .taken = {pending_.begin(), pending_.end()}};
  std::set<std::string> payloads(own.begin(), own.end());
  payloads.merge(pending_);
  pending_.clear();
  ride.payloads.assign(std::make_move_iterator(payloads.begin()), std::make_move_iterator(payloads.end()));
  return ride;
}

void AsyncNotifier::end_ride(Ride ride, RideEnd end) {
  bool wake_thread = false;
  {
    std::lock_guard lock(mutex_);
    sending_ = false;
    if (end == RideEnd::Carried) {
      ++rides_;
      last_was_ride_ = true;
      // Its NOTIFY went out as its statement committed, just now: the next one waits the
      // interval from here, not from when a statement that took long began.
      last_send_ = Clock::now();
    }
    auto& back = end == RideEnd::Failed ? ride.payloads : ride.taken;
    if (end != RideEnd::Carried)
      for (auto& payload : back) pending_.insert(std::move(payload));
    wake_thread = thread_waits_ == ThreadWait::ForRide || (thread_waits_ == ThreadWait::ForKeys && !pending_.empty());
  }
  idle_.notify_all();
  if (wake_thread) wake_.notify_all();
}

void AsyncNotifier::start_send_locked(Clock::time_point now) {
  // The next interval follows the rate of marks since the last send, every mark counted
  // (a key marked again while pending too): more than one per min_interval is a stream,
  // whose interval doubles; fewer, and the next key goes at once. Decided on the whole
  // window, not on when its first key came: that depends on where the window began,
  // and a stream that slowed down would stay at the longest interval.
  const bool stream = now - last_send_ < min_interval_ * static_cast<std::int64_t>(marks_);
  interval_ = stream ? std::min(interval_ * 2, max_interval_) : min_interval_;
  last_send_ = now;
  marks_ = 0;
}

AsyncNotifier::Stats AsyncNotifier::stats() const {
  std::lock_guard lock(mutex_);
  return {.sends = sends_, .rides = rides_, .interval = interval_};
}

void AsyncNotifier::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return (pending_.empty() && !sending_) || stopping_; });
}

void AsyncNotifier::run() {
  std::unique_ptr<pqxx::connection> connection;
  std::unique_lock lock(mutex_);
  // Waits on wake_ as `what` until `done`, or until `deadline` (if given).
  const auto wait = [&](ThreadWait what, auto done, std::optional<Clock::time_point> deadline = std::nullopt) {
    thread_waits_ = what;
    if (deadline)
      wake_.wait_until(lock, *deadline, done);
    else
      wake_.wait(lock, done);
    thread_waits_ = ThreadWait::Busy;
  };
  while (true) {
    wait(ThreadWait::ForKeys, [&] { return stopping_ || !pending_.empty(); });
    if (!stopping_) {
      // Within the interval of the last send (a ride's too), or while a ride is in flight:
      // let more keys accumulate, or a writer's next ride carry them. When the last send
      // was a ride, writers still get max_interval after the interval to take them on the
      // next one before this thread sends them with a transaction of its own: while they
      // keep writing, one does. Writers that never ride (the outbox's emits) wait for nothing.
      const auto thread_sends_at = last_send_ + interval_ + (last_was_ride_ ? max_interval_ : Clock::duration{});
      if (sending_ || Clock::now() < thread_sends_at) {
        if (sending_)
          wait(ThreadWait::ForRide, [&] { return stopping_ || !sending_; });
        else
          wait(
              ThreadWait::ForDeadline, [&] { return stopping_; }, thread_sends_at);
        continue;
      }
    } else if (sending_) {
      // Stopping with a ride in flight (its writer is returning): what it gives back is sent.
      wait(ThreadWait::ForRide, [&] { return !sending_; });
    }
    if (pending_.empty()) {
      if (stopping_) break;
      continue;
    }
    start_send_locked(Clock::now());
    last_was_ride_ = false;
    std::set<std::string> batch;
    batch.swap(pending_);
    sending_ = true;
    lock.unlock();
    try {
      // kNotifyMany turns off synchronous commit for its own transaction only.
      if (!connection || !connection->is_open()) connection = detail::open_connection(connection_string_);
      detail::PgArrayBuilder payloads;
      for (const auto& payload : batch) payloads.add(std::string_view(payload));
      // One autocommit statement for everything that accumulated while the last one ran.
      pqxx::nontransaction(*connection)
          .exec_params(detail::core_sql::kNotifyMany, channel_, std::move(payloads).finish());
    } catch (const std::exception& e) {
      connection.reset();
      spdlog::warn("notify on channel {} failed, listeners fall back to polling: {}", channel_, e.what());
      // Do not spin against a database that is down.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    lock.lock();
    ++sends_;
    sending_ = false;
    idle_.notify_all();
  }
  idle_.notify_all();
}

}  // namespace boxcar::detail
