// The webhook endpoint under abuse: what an unauthenticated request may cost (HMACs), and
// that slow clients cannot hold the server (header and body deadlines, the per-address
// request cap, enough workers in reserve). Real sockets over loopback; clients take
// addresses 127.0.0.2.. (Linux routes all of 127.0.0.0/8 to lo) to be several clients.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "webhook_test_support.hpp"

using namespace std::chrono_literals;
using namespace webhook_test;

namespace {

/// Sends all of `text` (MSG_NOSIGNAL: a peer that closed is an answer, not a crash).
bool send_text(int fd, const std::string& text) {
  for (std::size_t sent = 0; sent < text.size();) {
    const ssize_t n = ::send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<std::size_t>(n);
  }
  return true;
}

/// Reads until the server closes the connection or nothing arrives for `timeout`. Returns
/// true when the connection ended (EOF or reset), false when the wait timed out.
bool read_until_closed(int fd, std::chrono::milliseconds timeout, std::string& received) {
  char buffer[4096];
  for (;;) {
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
    const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
    if (n == 0) return true;
    if (n < 0) return errno == ECONNRESET;
    received.append(buffer, static_cast<std::size_t>(n));
  }
}

/// The headers of a request that passes every check that needs no body (fresh timestamp,
/// a well-formed if wrong signature), announcing `content_length` bytes it will trickle.
std::string slow_body_headers(std::size_t content_length) {
  return "POST " + std::string(webhook::kPath) +
         "/tenant-a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
         "webhook-id: evt-slow\r\nwebhook-timestamp: " +
         now_timestamp() + "\r\nwebhook-signature: v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\r\n" +
         "Content-Length: " + std::to_string(content_length) + "\r\n\r\n";
}

/// A slowloris population: `count` connections spread over `addresses`, half sending their
/// headers a byte at a time, half sending complete headers and then a body a byte at a time;
/// a background thread sends each one more byte every 100 ms until destruction.
class SlowClients {
 public:
  SlowClients(int port, int count, const std::vector<std::string>& addresses) {
    for (int i = 0; i < count; ++i) {
      const int fd = connect_from(addresses[static_cast<std::size_t>(i) % addresses.size()], port);
      if (fd < 0) continue;  // refused outright: as good as closed
      fds_.push_back(fd);
      const bool slow_headers = i % 2 == 0;
      send_text(fd, slow_headers ? "POST " + std::string(webhook::kPath) + "/tenant-a HTTP/1.1\r\nHost: x\r\n"
                                 : slow_body_headers(100000));
    }
    trickler_ = std::thread([this] {
      while (!stop_) {
        for (const int fd : fds_) ::send(fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        std::this_thread::sleep_for(100ms);
      }
    });
  }
  ~SlowClients() {
    stop_ = true;
    trickler_.join();
    for (const int fd : fds_) ::close(fd);
  }
  SlowClients(const SlowClients&) = delete;
  SlowClients& operator=(const SlowClients&) = delete;

  std::size_t connected() const { return fds_.size(); }

 private:
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::thread trickler_;
};

}  // namespace

TEST_CASE("an unauthenticated request costs at most its tenant's secrets in HMACs, and an unknown key id none") {
  // 52 tenants configured; before key selection every forged request cost 53 HMACs over its body.
  WebhookFixture f(options_with(many_tenants(50)));
  const std::string big = order_created(std::string(512 * 1024, 'o'));

  Delivery forged{.id = "evt-forged", .body = big};
  forged.signed_with({kUnknownSecret});
  std::uint64_t before = f.server.hmac_count();
  HttpResponse r = post(f.port(), forged);
  CHECK(r.status == 401);
  CHECK(r.json()["message"] == "no_matching_signature");
  CHECK(f.server.hmac_count() - before == 2);  // tenant-a's two active secrets, nobody else's

  Delivery unknown = forged;
  unknown.tenant = "tenant-zz";
  before = f.server.hmac_count();
  r = post(f.port(), unknown);
  CHECK(r.status == 401);
  CHECK(r.json()["message"] == "unknown_key_id");
  CHECK(f.server.hmac_count() - before == 0);

  Delivery stale{.id = "evt-stale", .timestamp = now_timestamp(-3600s), .body = big};
  stale.signed_with({kSecretA1});
  before = f.server.hmac_count();
  r = post(f.port(), stale);
  CHECK(r.status == 401);
  CHECK(r.json()["message"] == "stale_timestamp");
  CHECK(f.server.hmac_count() - before == 0);

  Delivery good{.id = "evt-good", .body = order_created("o-1"), .tenant = "tenant-7"};
  good.signed_with({whsec("secret of tenant 7")});
  before = f.server.hmac_count();
  r = post(f.port(), good);
  INFO(r.body);
  CHECK(r.status == 202);
  CHECK(f.server.hmac_count() - before == 1);
  CHECK(f.db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_id = 'tenant-7'") == 1);
}

TEST_CASE("a request over its address's limit is refused with 429 while other addresses are served") {
  webhook::ServerOptions options = options_with(webhook::parse_secrets(kSecretsSpec));
  options.max_connections_per_client = 2;
  options.body_timeout = 60s;  // so only the limit can refuse here
  WebhookFixture f(std::move(options));

  // Two requests from 127.0.0.2 past their headers, waiting for a body that never comes.
  std::vector<int> held;
  for (int i = 0; i < 2; ++i) {
    const int fd = connect_from("127.0.0.2", f.port());
    REQUIRE(fd >= 0);
    REQUIRE(send_text(fd, slow_body_headers(1000)));
    held.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);  // both in the handler: 127.0.0.2 is at its limit

  Delivery d{.id = "evt-third", .body = order_created("o-1")};
  const HttpResponse refused = http_request(f.port(), request_text(d.signed_with({kSecretA1})), "127.0.0.2", 10s);
  INFO(refused.body);
  CHECK(refused.status == 429);
  CHECK(refused.headers.count("retry-after") == 1);
  CHECK(f.server.refused_connections() == 1);
  CHECK(f.receipts() == 0);

  // Another address is not affected.
  const HttpResponse other = http_request(f.port(), request_text(d), "127.0.0.3", 10s);
  CHECK(other.status == 202);

  // Once 127.0.0.2's requests end, it is served again.
  for (const int fd : held) ::close(fd);
  Delivery again{.id = "evt-again", .body = order_created("o-2")};
  again.signed_with({kSecretA1});
  int status = 0;
  for (int attempt = 0; attempt < 100 && status != 202; ++attempt) {  // 10 s
    status = http_request(f.port(), request_text(again), "127.0.0.2", 10s).status;
    if (status != 202) std::this_thread::sleep_for(100ms);
  }
  CHECK(status == 202);
  CHECK(f.receipts() == 2);
}

TEST_CASE("a client that never finishes its headers is disconnected after header_timeout") {
  webhook::ServerOptions options = options_with(webhook::parse_secrets(kSecretsSpec));
  options.header_timeout = 500ms;
  WebhookFixture f(std::move(options));
  const int fd = connect_from("127.0.0.1", f.port());
  REQUIRE(fd >= 0);
  send_text(fd, "POST " + std::string(webhook::kPath) + "/tenant-a HTTP/1.1\r\nHost: 127.0.0.1\r\n");
  std::string received;
  CHECK(read_until_closed(fd, 10s, received));  // the old server waited 30 s
  ::close(fd);
  CHECK(f.receipts() == 0);
}

TEST_CASE("a body trickling in past body_timeout is refused with 408 and nothing is stored") {
  webhook::ServerOptions options = options_with(webhook::parse_secrets(kSecretsSpec));
  options.header_timeout = 300ms;
  options.body_timeout = 600ms;
  WebhookFixture f(std::move(options));

  const int fd = connect_from("127.0.0.1", f.port());
  REQUIRE(fd >= 0);
  REQUIRE(send_text(fd, slow_body_headers(1000)));
  // One byte every 50 ms: 1000 bytes would take 50 s. Stop sending once the server answers.
  bool answered = false;
  for (int i = 0; i < 200 && !answered; ++i) {  // at most 10 s
    send_text(fd, "a");
    pollfd p{.fd = fd, .events = POLLIN, .revents = 0};
    answered = ::poll(&p, 1, 50) > 0;
  }
  std::string received;
  read_until_closed(fd, 5s, received);
  ::close(fd);
  INFO(received);
  CHECK(answered);
  CHECK(received.starts_with("HTTP/1.1 408"));
  CHECK(f.server.body_timeouts() == 1);
  CHECK(received.find("BODY_TIMEOUT") != std::string::npos);
  CHECK(f.receipts() == 0);
}

TEST_CASE("200 slow clients do not stop a signed request from being accepted within 1 s") {
  WebhookFixture f;  // the default limits
  // Four addresses, 50 slow connections each, half stuck in their headers and half in a body.
  const SlowClients slow(f.port(), 200, {"127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"});
  REQUIRE(slow.connected() >= 190);
  std::this_thread::sleep_for(500ms);  // let the server take every one of them

  Delivery d{.id = "evt-under-siege", .body = order_created("o-1")};
  d.signed_with({kSecretA1});
  const auto start = std::chrono::steady_clock::now();
  HttpResponse r;
  REQUIRE_NOTHROW(r = http_request(f.port(), request_text(d), "127.0.0.1", 5s));
  const auto elapsed = std::chrono::steady_clock::now() - start;
  INFO(r.body << " after " << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms, "
              << f.server.refused_connections() << " slow connections refused");
  CHECK(r.status == 202);
  CHECK(elapsed < 1s);  // a liveness bound, not a benchmark
  CHECK(f.receipts() == 1);
}

TEST_CASE("limits that would bound nothing are refused when the server is built") {
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox{db.pool(), {.schema = db.schema(), .consumers = {"orders.projection.v1"}}};
  const auto with = [&](auto change) {
    webhook::ServerOptions options = options_with(webhook::parse_secrets(kSecretsSpec));
    change(options);
    return options;
  };
  CHECK_THROWS_AS(webhook::Server(inbox, with([](auto& o) { o.keys.clear(); })), std::invalid_argument);
  CHECK_THROWS_AS(webhook::Server(inbox, with([](auto& o) { o.threads = 2; })), std::invalid_argument);
  CHECK_THROWS_AS(webhook::Server(inbox, with([](auto& o) { o.header_timeout = 0ms; })), std::invalid_argument);
  CHECK_THROWS_AS(webhook::Server(inbox, with([](auto& o) { o.body_timeout = 10min; })), std::invalid_argument);
  CHECK_THROWS_AS(webhook::Server(inbox, with([](auto& o) { o.max_connections_per_client = -1; })),
                  std::invalid_argument);
  // No reserve: one address could hold every worker.
  CHECK_THROWS_AS(webhook::Server(inbox, with([](auto& o) {
                                    o.threads = 16;
                                    o.max_connections_per_client = 16;
                                  })),
                  std::invalid_argument);
  CHECK_NOTHROW(webhook::Server(inbox, with([](auto& o) { o.max_connections_per_client = 0; })));
}
