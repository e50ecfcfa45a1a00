// The background sender of coalesced NOTIFY wake-ups.
#include <pqxx/pqxx>

#include "boxcar/core/detail/async_notifier.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/detail/pg_array.hpp"
#include "core_queries.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>

namespace boxcar::detail {

AsyncNotifier::AsyncNotifier(std::string connection_string, std::string channel, std::chrono::microseconds min_interval,
                             std::chrono::microseconds max_interval)
    : connection_string_(std::move(connection_string)),
      channel_(std::move(channel)),
      min_interval_(min_interval),
      max_interval_(std::max(min_interval, max_interval)),
      interval_(min_interval_) {
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
    if (!pending_.insert(payload).second) return;
  }
  wake_.notify_one();
}

AsyncNotifier::Stats AsyncNotifier::stats() const {
  std::lock_guard lock(mutex_);
  return {.sends = sends_, .interval = interval_};
}

void AsyncNotifier::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return (pending_.empty() && !sending_) || stopping_; });
}

void AsyncNotifier::run() {
  using Clock = std::chrono::steady_clock;
  std::unique_ptr<pqxx::connection> connection;
  std::unique_lock lock(mutex_);
  // When the last send started; none yet: long ago.
  auto last_send = Clock::now() - max_interval_;
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) break;  // stopping with nothing left to send
    // Within the interval of the last send: let more keys accumulate into one statement.
    if (!stopping_ && Clock::now() < last_send + interval_)
      wake_.wait_until(lock, last_send + interval_, [&] { return stopping_; });
    // The next interval follows the rate of marks since the last send, every mark counted
    // (a key marked again while pending too): more than one per min_interval is a stream,
    // whose interval doubles; fewer, and the next key goes at once. Decided on the whole
    // window, not on when its first key came: that depends on where the window began,
    // and a stream that slowed down would stay at the longest interval.
    const auto now = Clock::now();
    const bool stream = now - last_send < min_interval_ * static_cast<std::int64_t>(marks_);
    interval_ = stream ? std::min(interval_ * 2, max_interval_) : min_interval_;
    last_send = now;
    marks_ = 0;
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
  sending_ = false;
  idle_.notify_all();
}

}  // namespace boxcar::detail
