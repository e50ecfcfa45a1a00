// Shared material for the webhook example's tests: secrets, a loopback HTTP client that can
// act as any 127.0.0.0/8 address, signed deliveries, and a server over a fresh schema.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/inbox.hpp"
#include "signature.hpp"
#include "boxcar/testing/testing.hpp"
#include "webhook_server.hpp"

namespace webhook_test {

using namespace std::chrono_literals;
using Json = nlohmann::json;

// ---------------------------------------------------------------- test material

inline std::vector<std::uint8_t> bytes(std::string_view text) { return {text.begin(), text.end()}; }

inline std::string whsec(std::string_view raw) { return "whsec_" + webhook::base64_encode(bytes(raw)); }

inline const std::string kSecretA1 = whsec("tenant-a first secret, 32 bytes!");
inline const std::string kSecretA2 = whsec("tenant-a rotated secret, 32 byte");
inline const std::string kSecretB = whsec("tenant-b secret .. 32 bytes long");
inline const std::string kUnknownSecret = whsec("nobody's secret ... 32 bytes ...");

inline std::string now_timestamp(std::chrono::seconds offset = 0s) {
  return std::to_string(
      std::chrono::duration_cast<std::chrono::seconds>((std::chrono::system_clock::now() + offset).time_since_epoch())
          .count());
}

// ---------------------------------------------------------------- loopback HTTP client

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  Json json() const { return Json::parse(body); }
};

/// A TCP connection to 127.0.0.1:port from `source` (any 127.0.0.0/8 address: Linux routes
/// them all to lo, so tests can act as several client addresses). -1 when refused.
inline int connect_from(const std::string& source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source.c_str(), &from.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot bind to " + source);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

/// Sends `request` and reads the whole response. A read that waits longer than
/// `read_timeout` ends the response (then it throws "no HTTP response").
inline HttpResponse http_request(int port, const std::string& request, const std::string& source = "127.0.0.1",
                                 std::chrono::milliseconds read_timeout = 60s) {
  const int fd = connect_from(source, port);
  if (fd < 0) throw std::runtime_error("cannot connect to port " + std::to_string(port));
  timeval timeout{};
  timeout.tv_sec = static_cast<time_t>(read_timeout.count() / 1000);
  timeout.tv_usec = static_cast<suseconds_t>(read_timeout.count() % 1000 * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  for (std::size_t sent = 0; sent < request.size();) {
    const ssize_t n = ::write(fd, request.data() + sent, request.size() - sent);
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("write failed");
    }
    sent += static_cast<std::size_t>(n);
  }
  std::string raw;
  char buffer[8192];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) raw.append(buffer, static_cast<std::size_t>(n));
  ::close(fd);

  HttpResponse response;
  const std::size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos) throw std::runtime_error("no HTTP response: '" + raw + "'");
  const std::string head = raw.substr(0, head_end);
  response.body = raw.substr(head_end + 4);
  std::size_t line_start = head.find("\r\n");
  response.status = std::stoi(head.substr(head.find(' ') + 1, 3));
  while (line_start != std::string::npos) {
    line_start += 2;
    const std::size_t line_end = head.find("\r\n", line_start);
    const std::string line = head.substr(line_start, line_end - line_start);
    if (const std::size_t colon = line.find(':'); colon != std::string::npos) {
      std::string name = line.substr(0, colon);
      for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      std::string value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.erase(0, 1);
      response.headers[name] = value;
    }
    line_start = line_end;
  }
  return response;
}

struct Delivery {
  std::string id;
  std::string timestamp = now_timestamp();
  std::string body;
  std::string signature{};  // empty: leave the header out
  /// The key id in the URL: /webhooks/orders/<tenant>.
  std::string tenant = "tenant-a";

  /// Signs with `secrets` (whsec_...), space-separated like a rotating sender.
  Delivery& signed_with(std::initializer_list<std::string> secrets) {
    signature.clear();
    for (const std::string& secret : secrets) {
      if (!signature.empty()) signature += ' ';
      signature += webhook::sign(webhook::decode_secret(secret), id, timestamp, body);
    }
    return *this;
  }
};

inline std::string path_of(const Delivery& d) { return std::string(webhook::kPath) + "/" + d.tenant; }

inline std::string request_text(const Delivery& d, const std::string& method = "POST", const std::string& path = {}) {
  std::string request = method + " " + (path.empty() ? path_of(d) : path) +
                        " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" + "Content-Type: application/json\r\n";
  if (!d.id.empty()) request += "webhook-id: " + d.id + "\r\n";
  if (!d.timestamp.empty()) request += "webhook-timestamp: " + d.timestamp + "\r\n";
  if (!d.signature.empty()) request += "webhook-signature: " + d.signature + "\r\n";
  request += "Content-Length: " + std::to_string(d.body.size()) + "\r\n\r\n" + d.body;
  return request;
}

inline HttpResponse post(int port, const Delivery& d) { return http_request(port, request_text(d)); }

inline std::string order_created(const std::string& order_id, double total = 99.5) {
  return Json{{"type", "order.created"}, {"version", 1}, {"data", {{"orderId", order_id}, {"total", total}}}}.dump();
}

/// A port nothing listens on: bound once, then released.
inline int dead_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t length = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  ::close(fd);
  return ntohs(addr.sin_port);
}

inline const std::string kSecretsSpec = "tenant-a=" + kSecretA1 + ", tenant-a=" + kSecretA2 + ",tenant-b=" + kSecretB;

/// tenant-a (two secrets) and tenant-b, plus `extra` other tenants with one secret each.
inline std::vector<webhook::SigningKey> many_tenants(int extra) {
  std::vector<webhook::SigningKey> keys = webhook::parse_secrets(kSecretsSpec);
  for (int i = 0; i < extra; ++i)
    keys.push_back({.tenant = "tenant-" + std::to_string(i), .secret = bytes("secret of tenant " + std::to_string(i))});
  return keys;
}

inline webhook::ServerOptions options_with(std::vector<webhook::SigningKey> keys) {
  webhook::ServerOptions options;
  options.listen = "127.0.0.1:0";
  options.keys = std::move(keys);
  return options;
}

/// A webhook server on a free loopback port over a fresh schema.
struct WebhookFixture {
  explicit WebhookFixture(webhook::ServerOptions options = options_with(webhook::parse_secrets(kSecretsSpec)))
      : server(inbox, std::move(options)) {}

  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox{db.pool(), {.schema = db.schema(), .consumers = {"orders.projection.v1"}}};
  webhook::Server server;

  int port() const { return server.port(); }
  std::int64_t receipts() const { return db.count("SELECT count(*) FROM {schema}.inbox_receipts"); }
};

}  // namespace webhook_test
