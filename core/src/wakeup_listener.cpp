// LISTEN on a dedicated connection that a reader thread drains at all times; the owner
// waits on what it collected, in 100 ms slices so a stop request is seen promptly.
#include "boxcar/core/detail/wakeup_listener.hpp"
#include "boxcar/core/detail/open_connection.hpp"

#include <cerrno>
#include <cstdint>
#include <condition_variable>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <spdlog/spdlog.h>

namespace boxcar::detail {

namespace {
// Collects the payloads libpqxx hands over while the reader reads notifications.
struct Wakeups final : pqxx::notification_receiver {
  using notification_receiver::notification_receiver;
  void operator()(const std::string& payload, int) override { received.push_back(payload); }
  std::vector<std::string> received;
};

// The LISTEN connection and its receiver, owned by the reader thread once handed over.
struct Listening {
  std::unique_ptr<pqxx::connection> connection;
  std::unique_ptr<Wakeups> receiver;
  ~Listening() { receiver.reset(); }  // before the connection it refers to
};
}  // namespace

struct WakeupListener::Impl {
  std::string connection_string;
  std::string channel;
  std::shared_ptr<spdlog::logger> log;

  // Wakes the reader out of poll() when the listener is destroyed.
  int stop_fd = -1;
  std::thread reader;

  std::mutex mutex;
  std::condition_variable arrived;
  // Guarded by mutex.
  bool listening = false;   // a reader thread holds a live LISTEN connection
  bool lost = false;        // the connection was lost since the last wait took it
  bool overflowed = false;  // payloads were dropped for want of room since the last wait
  std::set<std::string> pending;

  ~Impl() {
    if (stop_fd >= 0) {
      const std::uint64_t one = 1;
      [[maybe_unused]] const auto written = ::write(stop_fd, &one, sizeof one);
    }
    if (reader.joinable()) reader.join();
    if (stop_fd >= 0) ::close(stop_fd);
  }

  // Under mutex: keeps the distinct payloads received, up to kMaxPendingPayloads.
  void keep_locked(std::vector<std::string>& received) {
    for (auto& payload : received) {
      if (pending.size() >= kMaxPendingPayloads && !pending.contains(payload)) {
        overflowed = true;
        continue;
      }
      pending.insert(std::move(payload));
    }
    received.clear();
  }

  // The reader thread: reads whatever the server sends as soon as it arrives, whatever
  // the owner is doing, until the connection fails or the listener is destroyed.
  void read(std::unique_ptr<Listening> listening_connection) {
    auto& connection = *listening_connection->connection;
    auto& receiver = *listening_connection->receiver;
    try {
      for (;;) {
        // Notifications that arrived with an earlier reply sit in libpq's buffer, where
        // poll() cannot see them: take them before waiting on the socket.
        connection.get_notifs();  // throws when the connection is lost
        // A connection libpq has given up on returns nothing instead, and has no socket
        // left to wait on.
        if (!connection.is_open() || connection.sock() < 0) throw pqxx::broken_connection("connection closed");
        if (!receiver.received.empty()) {
          std::lock_guard lock(mutex);
          keep_locked(receiver.received);
          arrived.notify_all();
        }
        pollfd fds[2] = {{connection.sock(), POLLIN, 0}, {stop_fd, POLLIN, 0}};
        int ready;
        do {
          ready = ::poll(fds, 2, -1);
        } while (ready < 0 && errno == EINTR);
        if (ready < 0) throw std::system_error(errno, std::generic_category(), "poll on the LISTEN connection");
        if (fds[1].revents != 0) return;  // the listener is being destroyed
        if ((fds[0].revents & (POLLERR | POLLNVAL)) != 0) throw pqxx::broken_connection("socket error");
      }
    } catch (const std::exception& e) {
      log->warn("wake-up connection on {} lost, reconnecting: {}", channel, e.what());
    }
    listening_connection.reset();
    std::lock_guard lock(mutex);
    listening = false;
    lost = true;
    arrived.notify_all();
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
  impl_->stop_fd = ::eventfd(0, EFD_CLOEXEC);
  if (impl_->stop_fd < 0) throw std::system_error(errno, std::generic_category(), "eventfd for the wake-up listener");
}

WakeupListener::~WakeupListener() = default;

bool WakeupListener::ensure_listening() {
  {
    std::lock_guard lock(impl_->mutex);
    if (impl_->listening) return false;
  }
  // The previous reader, if any, has lost its connection and is ending.
  if (impl_->reader.joinable()) impl_->reader.join();
  auto listening = std::make_unique<Listening>();
  try {
    listening->connection = detail::open_connection(impl_->connection_string);
    listening->receiver = std::make_unique<Wakeups>(*listening->connection, impl_->channel);  // runs LISTEN
  } catch (const std::exception& e) {
    impl_->log->warn("cannot LISTEN on {} for wake-ups, polling instead: {}", impl_->channel, e.what());
    return false;
  }
  {
    std::lock_guard lock(impl_->mutex);
    impl_->listening = true;
    // The caller looks at everything now (this function's contract): the loss it would
    // otherwise learn of from the next wait is covered.
    impl_->lost = false;
  }
  impl_->reader =
      std::thread([impl = impl_.get(), owned = std::move(listening)]() mutable { impl->read(std::move(owned)); });
  return true;
}

WakeupListener::Wakeup WakeupListener::wait_until(std::chrono::steady_clock::time_point until,
                                                  const std::function<bool()>& stop, const Filter& wanted) {
  using Clock = std::chrono::steady_clock;
  Wakeup wakeup;
  for (;;) {
    const auto slice = wait_slice(Clock::now(), until);
    if (slice.count() == 0 || stop()) break;
    std::set<std::string> arrived;
    bool missed;
    {
      std::unique_lock lock(impl_->mutex);
      impl_->arrived.wait_for(lock, slice, [&] { return !impl_->pending.empty() || impl_->lost || impl_->overflowed; });
      arrived.swap(impl_->pending);
      missed = impl_->lost || impl_->overflowed;
      impl_->lost = false;
      impl_->overflowed = false;
    }
    for (auto& payload : arrived)  // the caller's filter runs outside the lock
      if (!wanted || wanted(payload)) wakeup.payloads.insert(payload);
    if (missed) {
      wakeup.may_have_missed = true;
      return wakeup;
    }
    if (!wakeup.payloads.empty()) return wakeup;
  }
  return wakeup;
}

}  // namespace boxcar::detail
