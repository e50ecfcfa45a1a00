#include "civetweb_stop.hpp"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <system_error>
#include <thread>

namespace boxcar::detail {
namespace {

// A connection attempt to the port on loopback, closed at once: enough to end a poll on
// the listening socket. Failures are ignored (then mg_stop() just takes its time).
// (mg_server_port::protocol 2 is IPv6 only; 1 and 3, IPv4 or both, take IPv4.)
void poke(const mg_server_port& port) {
  sockaddr_in6 v6{};
  sockaddr_in v4{};
  const bool ipv6 = port.protocol == 2;
  const auto number = htons(static_cast<std::uint16_t>(port.port));
  v6.sin6_family = AF_INET6;
  v6.sin6_port = number;
  v6.sin6_addr = in6addr_loopback;
  v4.sin_family = AF_INET;
  v4.sin_port = number;
  v4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const int fd = ::socket(ipv6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (ipv6)
    (void)::connect(fd, reinterpret_cast<const sockaddr*>(&v6), sizeof v6);
  else
    (void)::connect(fd, reinterpret_cast<const sockaddr*>(&v4), sizeof v4);
  ::close(fd);
}

}  // namespace

void stop_promptly(mg_context* context) noexcept {
  mg_server_port ports[4] = {};
  const int count = mg_get_server_ports(context, 4, ports);
  std::atomic<bool> stopped{false};
  std::thread waker;
  if (count > 0) {
    try {
      waker = std::thread([&] {
        while (!stopped.load()) {
          for (int i = 0; i < count; ++i) poke(ports[i]);
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
      });
    } catch (const std::system_error&) {
      // No thread to spare: mg_stop() takes its time.
    }
  }
  mg_stop(context);
  stopped = true;
  if (waker.joinable()) waker.join();
}

}  // namespace boxcar::detail
