// The background sender of coalesced NOTIFY wake-ups.
#include <pqxx/pqxx>

#include "boxcar/core/detail/async_notifier.hpp"
#include "boxcar/core/detail/open_connection.hpp"
#include "boxcar/core/detail/pg_array.hpp"
#include "core_queries.hpp"

#include <chrono>
#include <vector>

#include <spdlog/spdlog.h>

namespace boxcar::detail {

AsyncNotifier::AsyncNotifier(std::string connection_string, std::string channel, std::chrono::microseconds min_interval)
    : connection_string_(std::move(connection_string)), channel_(std::move(channel)), min_interval_(min_interval) {
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
    if (!pending_.insert(payload).second) return;
  }
  wake_.notify_one();
}

void AsyncNotifier::flush() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [&] { return (pending_.empty() && !sending_) || stopping_; });
}

void AsyncNotifier::run() {
  std::unique_ptr<pqxx::connection> connection;
  std::unique_lock lock(mutex_);
  auto next_send = std::chrono::steady_clock::now();
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (pending_.empty()) break;  // stopping with nothing left to send
    // Within min_interval of the last send: let more keys accumulate into one statement.
    if (!stopping_ && std::chrono::steady_clock::now() < next_send) {
      wake_.wait_until(lock, next_send, [&] { return stopping_; });
    }
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
    next_send = std::chrono::steady_clock::now() + min_interval_;
    sending_ = false;
    idle_.notify_all();
  }
  sending_ = false;
  idle_.notify_all();
}

}  // namespace boxcar::detail
