// Loopback HTTP GET and Prometheus sample lookup for tests.
#include "http_get.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sstream>
#include <stdexcept>

namespace boxcar::testing {

HttpResponse http_get(int port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("http_get: cannot connect to port " + std::to_string(port));
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    throw std::runtime_error("http_get: write failed");
  }
  std::string raw;
  char buffer[8192];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) raw.append(buffer, static_cast<size_t>(n));
  ::close(fd);
  HttpResponse response;
  std::istringstream status_line(raw.substr(0, raw.find("\r\n")));
  std::string version;
  status_line >> version >> response.status;
  const auto body = raw.find("\r\n\r\n");
  if (body != std::string::npos) response.body = raw.substr(body + 4);
  return response;
}

double metric_value(const std::string& exposition, const std::string& name, const std::string& labels) {
  const std::string prefix = labels.empty() ? name + " " : name + "{" + labels + "} ";
  std::istringstream lines(exposition);
  for (std::string line; std::getline(lines, line);)
    if (line.starts_with(prefix)) return std::stod(line.substr(prefix.size()));
  return -1;
}

}  // namespace boxcar::testing
