// LISTEN on a dedicated connection, in 100 ms slices so a stop request is seen promptly.
#include "boxcar/core/detail/wakeup_listener.hpp"
#include "boxcar/core/detail/open_connection.hpp"

#include <thread>
#include <vector>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

namespace boxcar::detail {

namespace {
// Collects the payloads libpqxx hands over while the listener reads notifications.
struct Wakeups final : pqxx::notification_receiver {
  using notification_receiver::notification_receiver;
  void operator()(const std::string& payload, int) override { received.push_back(payload); }
  std::vector<std::string> received;
};
}  // namespace

struct WakeupListener::Impl {
  std::string connection_string;
  std::string channel;
  std::shared_ptr<spdlog::logger> log;
  std::unique_ptr<pqxx::connection> connection;
  std::unique_ptr<Wakeups> receiver;

  void drop() {
    receiver.reset();
    connection.reset();
  }

  // Moves the received payloads that `wanted` accepts into `into`; drops the others.
  void take(const Filter& wanted, std::set<std::string>& into) {
    for (auto& payload : receiver->received)
      if (!wanted || wanted(payload)) into.insert(std::move(payload));
    receiver->received.clear();
  }
};

std::chrono::milliseconds wait_slice(std::chrono::steady_clock::time_point now,
                                     std::chrono::steady_clock::time_point until) {
  using std::chrono::milliseconds;
  if (until <= now) return milliseconds(0);
  return std::min(std::chrono::duration_cast<milliseconds>(until - now) + milliseconds(1), milliseconds(100));
}

WakeupListener::WakeupListener(std::string connection_string, std::string channel, std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>()) {
  impl_->connection_string = std::move(connection_string);
  impl_->channel = std::move(channel);
  impl_->log = std::move(log);
}

WakeupListener::~WakeupListener() = default;

bool WakeupListener::ensure_listening() {
  if (impl_->connection) return false;
  try {
    impl_->connection = detail::open_connection(impl_->connection_string);
    impl_->receiver = std::make_unique<Wakeups>(*impl_->connection, impl_->channel);
    return true;
  } catch (const std::exception& e) {
    impl_->drop();
    impl_->log->warn("cannot LISTEN on {} for wake-ups, polling instead: {}", impl_->channel, e.what());
    return false;
  }
}

WakeupListener::Wakeup WakeupListener::wait_until(std::chrono::steady_clock::time_point until,
                                                  const std::function<bool()>& stop, const Filter& wanted) {
  using Clock = std::chrono::steady_clock;
  Wakeup wakeup;
  for (;;) {
    const auto slice = wait_slice(Clock::now(), until);
    if (slice.count() == 0 || stop()) break;
    if (!impl_->connection) {
      std::this_thread::sleep_for(slice);
      continue;
    }
    try {
      // Takes notifications that arrived while the caller was busy first, without waiting.
      impl_->connection->await_notification(0, static_cast<long>(slice.count()) * 1000);
      if (impl_->receiver->received.empty()) continue;
      impl_->connection->get_notifs();  // take any others that arrived together
      impl_->take(wanted, wakeup.payloads);
      if (!wakeup.payloads.empty()) return wakeup;
    } catch (const std::exception& e) {
      impl_->log->warn("wake-up connection on {} lost, reconnecting: {}", impl_->channel, e.what());
      impl_->drop();
      wakeup.may_have_missed = true;
      return wakeup;
    }
  }
  return wakeup;
}

}  // namespace boxcar::detail
