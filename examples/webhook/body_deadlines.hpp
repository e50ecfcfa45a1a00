// A total deadline for reading a request body, which civetweb 1.15 cannot enforce alone.
//
// civetweb's mg_read() returns only when its buffer is full or the socket has been silent
// for request_timeout_ms: a client that sends one byte a second keeps a single mg_read()
// (and its worker thread) for as long as it likes. BodyDeadlines arms a deadline per
// request; a watchdog thread shuts down the read side of a connection whose deadline passes,
// so the blocked mg_read() returns at once and the handler can still answer 408.
//
// Thread-safety: arm/disarm may be called from any thread. Blocking: the destructor joins
// the watchdog (it never waits on a client).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace webhook {

/// The address pair that identifies one server-side TCP connection.
struct ConnectionAddress {
  std::string remote_address;  // as civetweb prints it: "127.0.0.2", "::1"
  int remote_port = 0;
  int local_port = 0;
};

/// Shuts down the read side of this process's socket for `connection` (found by its
/// address pair among the descriptors in /proc/self/fd; a live connection's pair is unique).
/// shutdown(), never close(): the descriptor stays civetweb's to close. False if not found.
bool shut_down_reading(const ConnectionAddress& connection);

class BodyDeadlines {
 public:
  using Clock = std::chrono::steady_clock;

  BodyDeadlines();
  ~BodyDeadlines();
  BodyDeadlines(const BodyDeadlines&) = delete;
  BodyDeadlines& operator=(const BodyDeadlines&) = delete;

  /// Cuts `connection`'s reading at `deadline` unless disarmed first. Returns the token.
  std::uint64_t arm(ConnectionAddress connection, Clock::time_point deadline);
  /// After this returns, the watchdog no longer touches the connection.
  void disarm(std::uint64_t token);

  /// Connections whose reading was cut (for tests and monitoring).
  std::uint64_t expired() const;

 private:
  void watch();

  struct Armed {
    ConnectionAddress connection;
    Clock::time_point deadline;
  };
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::uint64_t, Armed> armed_;
  std::uint64_t next_token_ = 1;
  std::uint64_t expired_ = 0;
  bool stopping_ = false;
  std::thread watchdog_;
};

}  // namespace webhook
