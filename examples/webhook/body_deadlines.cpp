// The body-read watchdog and the lookup of a connection's socket by its address pair.
#include "body_deadlines.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

namespace webhook {

namespace {

bool same_peer(const sockaddr_storage& address, const std::string& text, int port) {
  if (address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(address);
    in_addr parsed{};
    return inet_pton(AF_INET, text.c_str(), &parsed) == 1 && ntohs(in.sin_port) == port &&
           std::memcmp(&parsed, &in.sin_addr, sizeof parsed) == 0;
  }
  if (address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(address);
    in6_addr parsed{};
    return inet_pton(AF_INET6, text.c_str(), &parsed) == 1 && ntohs(in6.sin6_port) == port &&
           std::memcmp(&parsed, &in6.sin6_addr, sizeof parsed) == 0;
  }
  return false;
}

int port_of(const sockaddr_storage& address) {
  if (address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(address).sin_port);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(address).sin6_port);
  return -1;
}

}  // namespace

bool shut_down_reading(const ConnectionAddress& connection) {
  // civetweb 1.15 has no API that returns a connection's socket. Only connections that
  // overran their deadline pay for this scan.
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    sockaddr_storage peer{}, local{};
    socklen_t peer_length = sizeof peer, local_length = sizeof local;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) continue;
    if (!same_peer(peer, connection.remote_address, connection.remote_port)) continue;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) continue;
    if (port_of(local) != connection.local_port) continue;
    // SHUT_RD only: the pending recv() returns 0 at once, and the 408 can still be written.
    return ::shutdown(fd, SHUT_RD) == 0;
  }
  return false;
}

BodyDeadlines::BodyDeadlines() : watchdog_([this] { watch(); }) {}

BodyDeadlines::~BodyDeadlines() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  watchdog_.join();
}

std::uint64_t BodyDeadlines::arm(ConnectionAddress connection, Clock::time_point deadline) {
  std::uint64_t token = 0;
  {
    const std::lock_guard lock(mutex_);
    token = next_token_++;
    armed_.emplace(token, Armed{.connection = std::move(connection), .deadline = deadline});
  }
  changed_.notify_all();
  return token;
}

void BodyDeadlines::disarm(std::uint64_t token) {
  // The watchdog cuts connections while holding the mutex, so once this returns it cannot
  // touch a socket that civetweb may already have closed and reused.
  const std::lock_guard lock(mutex_);
  armed_.erase(token);
}

std::uint64_t BodyDeadlines::expired() const {
  const std::lock_guard lock(mutex_);
  return expired_;
}

void BodyDeadlines::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    Clock::time_point next = Clock::time_point::max();
    const Clock::time_point now = Clock::now();
    for (auto it = armed_.begin(); it != armed_.end();) {
      if (it->second.deadline <= now) {
        shut_down_reading(it->second.connection);
        ++expired_;
        it = armed_.erase(it);
      } else {
        next = std::min(next, it->second.deadline);
        ++it;
      }
    }
    if (next == Clock::time_point::max())
      changed_.wait(lock);
    else
      changed_.wait_until(lock, next);
  }
}

}  // namespace webhook
