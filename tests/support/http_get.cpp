// The tests' loopback HTTP client.
#include "http_get.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdint>
#include <stdexcept>

namespace boxcar::testing {
namespace {

class Socket {
 public:
  Socket() : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
    if (fd_ < 0) throw std::runtime_error("http_request: socket() failed");
  }
  ~Socket() { ::close(fd_); }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

HttpResponse http_request(int port, const std::string& method, const std::string& path) {
  return http_send(port, method, path, {"Host: 127.0.0.1"}, "");
}

HttpResponse http_send(int port, const std::string& method, const std::string& path,
                       const std::vector<std::string>& headers, const std::string& body) {
  Socket socket;
  timeval timeout{5, 0};
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(socket.fd(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(socket.fd(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    throw std::runtime_error("http_request: cannot connect to port " + std::to_string(port));

  std::string request = method + " " + path + " HTTP/1.1\r\n";
  bool has_host = false;
  for (const auto& header : headers) {
    request += header + "\r\n";
    has_host = has_host || header.rfind("Host:", 0) == 0;
  }
  if (!has_host) request += "Host: 127.0.0.1:" + std::to_string(port) + "\r\n";
  request += "Connection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  std::size_t sent = 0;
  while (sent < request.size()) {
    const auto n = ::send(socket.fd(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) throw std::runtime_error("http_request: send failed");
    sent += static_cast<std::size_t>(n);
  }
  std::string raw;
  char buffer[8192];
  for (;;) {
    const auto n = ::recv(socket.fd(), buffer, sizeof buffer, 0);
    if (n < 0) throw std::runtime_error("http_request: no answer within 5 s from port " + std::to_string(port));
    if (n == 0) break;
    raw.append(buffer, static_cast<std::size_t>(n));
  }

  const auto header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos || raw.rfind("HTTP/1.", 0) != 0)
    throw std::runtime_error("http_request: not an HTTP response: " + raw.substr(0, 200));
  HttpResponse response;
  response.headers = raw.substr(0, header_end);
  response.body = raw.substr(header_end + 4);
  response.status = std::stoi(response.headers.substr(response.headers.find(' ') + 1, 3));
  return response;
}

HttpResponse http_get(int port, const std::string& path) { return http_request(port, "GET", path); }

}  // namespace boxcar::testing
