// Fault-injecting loopback TCP proxy (see tcp_proxy.hpp).
#include "boxcar/testing/tcp_proxy.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <regex>
#include <stdexcept>

namespace boxcar::testing {

TcpProxy::TcpProxy(std::string target_host, int target_port)
    : host_(std::move(target_host)), target_port_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int yes = 1;
  ::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || ::listen(listener_, 64) != 0)
    throw std::runtime_error("tcp proxy: cannot listen on loopback");
  socklen_t len = sizeof addr;
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  acceptor_ = std::thread([this] { accept_loop(); });
}

TcpProxy::~TcpProxy() {
  stopping_ = true;
  ::shutdown(listener_, SHUT_RDWR);
  ::close(listener_);
  acceptor_.join();
  std::lock_guard lock(mutex_);
  for (auto& t : pumps_) t.join();
}

std::string TcpProxy::route(const std::string& url) const {
  static const std::regex host_port(R"(@([^:/]+):(\d+)/)");
  return std::regex_replace(url, host_port, "@127.0.0.1:" + std::to_string(port_) + "/");
}

void TcpProxy::arm(Mode mode, const std::string& sql, bool ends_in_commit) {
  // A simple-protocol Query message: 'Q', its length (itself included), the text, NUL.
  const auto length = static_cast<std::uint32_t>(4 + sql.size() + 1);
  std::string message = "Q";
  for (int shift = 24; shift >= 0; shift -= 8) message += static_cast<char>((length >> shift) & 0xff);
  message += sql;
  message += '\0';
  {
    std::lock_guard lock(query_mutex_);
    query_message_ = std::move(message);
    any_commit_ = ends_in_commit;
  }
  mode_ = mode;
}

void TcpProxy::arm_statement(Mode mode, const std::string& name) {
  {
    std::lock_guard lock(query_mutex_);
    // A Bind message after its type and length: the portal name (libpq's unnamed one, an
    // empty string), then the statement name, each NUL-terminated.
    query_message_ = std::string(1, '\0') + name + '\0';
    any_commit_ = false;
  }
  mode_ = mode;
}

bool TcpProxy::take_query_fault(Mode mode, std::string_view bytes) {
  if (mode_ != mode) return false;
  std::lock_guard lock(query_mutex_);
  if (mode == Mode::DropResponseToStatement || mode == Mode::DropRequestOfStatement) {
    if (bytes.size() < 5 || bytes[0] != 'B' || !bytes.substr(5).starts_with(query_message_)) return false;
  } else if (bytes.find(query_message_) == std::string_view::npos) {
    // A multi-statement Query whose last statement is COMMIT ends with it on a line of its
    // own, then the message's NUL.
    constexpr std::string_view kCommitLast{"\nCOMMIT\0", 8};
    if (!any_commit_ || bytes.find(kCommitLast) == std::string_view::npos) return false;
  }
  Mode expected = mode;
  return mode_.compare_exchange_strong(expected, Mode::Pass);
}

void TcpProxy::accept_loop() {
  while (!stopping_) {
    pollfd fd{listener_, POLLIN, 0};
    if (::poll(&fd, 1, 100) <= 0) continue;
    const int client = ::accept(listener_, nullptr, nullptr);
    if (client < 0) continue;
    ++connections_;
    if (down_) {
      ::close(client);
      continue;
    }
    const int server = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    ::inet_pton(AF_INET, host_.c_str(), &addr.sin_addr);
    if (::connect(server, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(client);
      ::close(server);
      continue;
    }
    sockaddr_in local{};
    socklen_t local_len = sizeof local;
    const bool named = ::getsockname(server, reinterpret_cast<sockaddr*>(&local), &local_len) == 0;
    std::lock_guard lock(mutex_);
    if (named) server_side_ports_.push_back(ntohs(local.sin_port));
    pumps_.emplace_back([this, client, server] { pump(client, server); });
  }
}

std::vector<int> TcpProxy::server_side_ports() const {
  std::lock_guard lock(mutex_);
  return server_side_ports_;
}

void TcpProxy::pump(int client, int server) {
  char buffer[65536];
  bool swallowing = false;
  while (!stopping_ && !down_) {
    pollfd fds[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    if (::poll(fds, 2, 100) <= 0) continue;
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(client, buffer, sizeof buffer);
      if (n <= 0) break;
      Mode expected = Mode::DropRequest;
      if (mode_.compare_exchange_strong(expected, Mode::Pass)) {
        ++faults_;
        break;
      }
      expected = Mode::DropResponse;
      if (mode_.compare_exchange_strong(expected, Mode::Pass)) {
        ++faults_;
        swallowing = true;
      }
      const std::string_view bytes(buffer, static_cast<size_t>(n));
      if (take_query_fault(Mode::DropRequestOf, bytes) || take_query_fault(Mode::DropRequestOfStatement, bytes)) {
        ++faults_;
        break;
      }
      if (take_query_fault(Mode::DropResponseTo, bytes) || take_query_fault(Mode::DropResponseToStatement, bytes)) {
        ++faults_;
        swallowing = true;
      }
      if (::write(server, buffer, static_cast<size_t>(n)) != n) break;
    }
    if (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) {
      const ssize_t n = ::read(server, buffer, sizeof buffer);
      if (n <= 0) break;
      if (swallowing) break;  // the server answered: the work is done, the client never learns
      if (::write(client, buffer, static_cast<size_t>(n)) != n) break;
    }
  }
  ::shutdown(client, SHUT_RDWR);
  ::close(client);
  ::close(server);
}

}  // namespace boxcar::testing
