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
void poke(const mg_server_port& port) {
  const bool v6 = port.protocol == 2;
  const int fd = ::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  if (v6) {
    sockaddr_in6 address{};
    address.sin6_family = AF_INET6;
    address.sin6_port = htons(static_cast<std::uint16_t>(port.port));
    address.sin6_addr = in6addr_loopback;
    (void)::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  } else {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<std::uint16_t>(port.port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address);
  }
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
