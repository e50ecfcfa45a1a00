// The webhook example's tests: verify() on its own (no database), then every row of the
// response table with real HTTP requests over loopback against an in-process server on a
// free port, backed by a fresh TestSchema schema.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cctype>
#include <chrono>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "boxcar/inbox/inbox.hpp"
#include "signature.hpp"
#include "boxcar/testing/testing.hpp"
#include "webhook_server.hpp"

using namespace std::chrono_literals;
using Json = nlohmann::json;

namespace {

// ---------------------------------------------------------------- test material

std::vector<std::uint8_t> bytes(std::string_view text) { return {text.begin(), text.end()}; }

std::string whsec(std::string_view raw) { return "whsec_" + webhook::base64_encode(bytes(raw)); }

const std::string kSecretA1 = whsec("tenant-a first secret, 32 bytes!");
const std::string kSecretA2 = whsec("tenant-a rotated secret, 32 byte");
const std::string kSecretB = whsec("tenant-b secret .. 32 bytes long");
const std::string kUnknownSecret = whsec("nobody's secret ... 32 bytes ...");

std::string now_timestamp(std::chrono::seconds offset = 0s) {
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

HttpResponse http_request(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot connect to port " + std::to_string(port));
  }
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

std::string request_text(const Delivery& d, const std::string& method = "POST",
                         const std::string& path = webhook::kPath) {
  std::string request = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n" +
                        "Content-Type: application/json\r\n";
  if (!d.id.empty()) request += "webhook-id: " + d.id + "\r\n";
  if (!d.timestamp.empty()) request += "webhook-timestamp: " + d.timestamp + "\r\n";
  if (!d.signature.empty()) request += "webhook-signature: " + d.signature + "\r\n";
  request += "Content-Length: " + std::to_string(d.body.size()) + "\r\n\r\n" + d.body;
  return request;
}

HttpResponse post(int port, const Delivery& d) { return http_request(port, request_text(d)); }

std::string order_created(const std::string& order_id, double total = 99.5) {
  return Json{{"type", "order.created"}, {"version", 1}, {"data", {{"orderId", order_id}, {"total", total}}}}.dump();
}

/// A port nothing listens on: bound once, then released.
int dead_port() {
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

const std::string kSecretsSpec = "tenant-a=" + kSecretA1 + ", tenant-a=" + kSecretA2 + ",tenant-b=" + kSecretB;

/// A webhook server on a free loopback port over a fresh schema.
struct WebhookFixture {
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox{db.pool(), {.schema = db.schema(), .consumers = {"orders.projection.v1"}}};
  webhook::Server server{inbox, {.listen = "127.0.0.1:0", .keys = webhook::parse_secrets(kSecretsSpec)}};

  int port() const { return server.port(); }
  std::int64_t receipts() const { return db.count("SELECT count(*) FROM {schema}.inbox_receipts"); }
};

}  // namespace

// ================================================================ verify() unit tests

TEST_CASE("verify accepts the Standard Webhooks reference signature") {
  // The test vector published with the Standard Webhooks reference libraries.
  const std::vector<webhook::SigningKey> keys = webhook::parse_secrets("t=whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  const webhook::VerifyInput input{.id = "msg_p5jXN8AQM9LWM0D4loKWxJek",
                                   .timestamp = "1614265330",
                                   .signature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
                                   .body = R"({"test": 2432232314})"};
  const auto at = std::chrono::system_clock::time_point(1614265330s);
  CHECK(webhook::sign(keys[0].secret, input.id, input.timestamp, input.body) == input.signature);
  const webhook::VerifyResult result = webhook::verify(keys, input, at);
  CHECK(result.status == webhook::VerifyStatus::Verified);
  CHECK(result.tenant == "t");
}

TEST_CASE("verify rejects a tampered body, id or timestamp and a foreign key") {
  const auto keys = webhook::parse_secrets(kSecretsSpec);
  const auto now = std::chrono::system_clock::now();
  const std::string ts =
      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
  const std::string body = R"({"type":"order.created","data":{"orderId":"o-1"}})";
  const std::string signature = webhook::sign(webhook::decode_secret(kSecretA1), "evt-1", ts, body);
  const auto check = [&](webhook::VerifyInput input) { return webhook::verify(keys, input, now).status; };

  CHECK(check({.id = "evt-1", .timestamp = ts, .signature = signature, .body = body}) ==
        webhook::VerifyStatus::Verified);
  std::string tampered = body;
  tampered[tampered.find("o-1") + 2] = '2';
  CHECK(check({.id = "evt-1", .timestamp = ts, .signature = signature, .body = tampered}) ==
        webhook::VerifyStatus::NoMatchingSignature);
  CHECK(check({.id = "evt-1", .timestamp = ts, .signature = signature, .body = body + " "}) ==
        webhook::VerifyStatus::NoMatchingSignature);
  CHECK(check({.id = "evt-2", .timestamp = ts, .signature = signature, .body = body}) ==
        webhook::VerifyStatus::NoMatchingSignature);
  const std::string other_ts = std::to_string(std::stoll(ts) - 1);
  CHECK(check({.id = "evt-1", .timestamp = other_ts, .signature = signature, .body = body}) ==
        webhook::VerifyStatus::NoMatchingSignature);
  const std::string foreign = webhook::sign(webhook::decode_secret(kUnknownSecret), "evt-1", ts, body);
  CHECK(check({.id = "evt-1", .timestamp = ts, .signature = foreign, .body = body}) ==
        webhook::VerifyStatus::NoMatchingSignature);
}

TEST_CASE("verify names the tenant of whichever key verified, including a rotated one") {
  const auto keys = webhook::parse_secrets(kSecretsSpec);
  const auto now = std::chrono::system_clock::now();
  const std::string ts =
      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
  const std::string body = "{}";
  const auto tenant_for = [&](const std::string& secret) {
    const std::string sig = webhook::sign(webhook::decode_secret(secret), "evt-1", ts, body);
    return webhook::verify(keys, {.id = "evt-1", .timestamp = ts, .signature = sig, .body = body}, now).tenant;
  };
  CHECK(tenant_for(kSecretA1) == "tenant-a");
  CHECK(tenant_for(kSecretA2) == "tenant-a");
  CHECK(tenant_for(kSecretB) == "tenant-b");

  // A sender mid-rotation lists an old (unknown here) and a new signature, plus a scheme
  // we do not support: one match is enough, the rest is skipped.
  const std::string list = "v1a,AAAA " + webhook::sign(webhook::decode_secret(kUnknownSecret), "evt-1", ts, body) +
                           " v1,not-base64! " + webhook::sign(webhook::decode_secret(kSecretB), "evt-1", ts, body);
  const auto result = webhook::verify(keys, {.id = "evt-1", .timestamp = ts, .signature = list, .body = body}, now);
  CHECK(result.status == webhook::VerifyStatus::Verified);
  CHECK(result.tenant == "tenant-b");
}

TEST_CASE("verify rejects timestamps outside the tolerance, malformed timestamps and missing headers") {
  const auto keys = webhook::parse_secrets(kSecretsSpec);
  const auto now = std::chrono::system_clock::now();
  const auto status_at = [&](std::chrono::seconds offset) {
    const std::string ts =
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>((now + offset).time_since_epoch()).count());
    const std::string sig = webhook::sign(webhook::decode_secret(kSecretA1), "evt-1", ts, "{}");
    return webhook::verify(keys, {.id = "evt-1", .timestamp = ts, .signature = sig, .body = "{}"}, now).status;
  };
  CHECK(status_at(-299s) == webhook::VerifyStatus::Verified);
  CHECK(status_at(299s) == webhook::VerifyStatus::Verified);
  CHECK(status_at(-301s) == webhook::VerifyStatus::StaleTimestamp);
  CHECK(status_at(-600s) == webhook::VerifyStatus::StaleTimestamp);
  CHECK(status_at(301s) == webhook::VerifyStatus::StaleTimestamp);

  const std::string sig = webhook::sign(webhook::decode_secret(kSecretA1), "evt-1", "12x", "{}");
  for (const char* ts : {"12x", "-5", "1.5", " 17", "99999999999999999999999"})
    CHECK(webhook::verify(keys, {.id = "evt-1", .timestamp = ts, .signature = sig, .body = "{}"}, now).status ==
          webhook::VerifyStatus::InvalidTimestamp);
  CHECK(webhook::verify(keys, {.id = "", .timestamp = "1", .signature = sig, .body = "{}"}, now).status ==
        webhook::VerifyStatus::MissingHeader);
  CHECK(webhook::verify(keys, {.id = "e", .timestamp = "1", .signature = "", .body = "{}"}, now).status ==
        webhook::VerifyStatus::MissingHeader);
}

TEST_CASE("signatures are compared over every byte, in constant time, and must be a full MAC") {
  // constant_time_equal is CRYPTO_memcmp behind a length check: a MAC that differs only
  // in its first or only in its last byte is as wrong as any other.
  const std::vector<std::uint8_t> mac(32, 0x5a);
  auto first = mac, last = mac;
  first.front() ^= 1;
  last.back() ^= 0x80;
  CHECK(webhook::constant_time_equal(mac, mac));
  CHECK_FALSE(webhook::constant_time_equal(mac, first));
  CHECK_FALSE(webhook::constant_time_equal(mac, last));
  CHECK_FALSE(webhook::constant_time_equal(mac, std::vector<std::uint8_t>(mac.begin(), mac.end() - 1)));
  CHECK(webhook::constant_time_equal({}, {}));

  const auto keys = webhook::parse_secrets(kSecretsSpec);
  const auto now = std::chrono::system_clock::now();
  const std::string ts =
      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
  const std::string good = webhook::sign(webhook::decode_secret(kSecretA1), "evt-1", ts, "{}");
  std::vector<std::uint8_t> raw;
  REQUIRE(webhook::base64_decode(good.substr(3), raw));
  const auto with = [&](std::vector<std::uint8_t> m) {
    return webhook::verify(
               keys, {.id = "evt-1", .timestamp = ts, .signature = "v1," + webhook::base64_encode(m), .body = "{}"},
               now)
        .status;
  };
  CHECK(with(raw) == webhook::VerifyStatus::Verified);
  auto flipped_first = raw, flipped_last = raw;
  flipped_first.front() ^= 1;
  flipped_last.back() ^= 1;
  CHECK(with(flipped_first) == webhook::VerifyStatus::NoMatchingSignature);
  CHECK(with(flipped_last) == webhook::VerifyStatus::NoMatchingSignature);
  CHECK(with({raw.begin(), raw.begin() + 16}) == webhook::VerifyStatus::NoMatchingSignature);  // a prefix
  CHECK(with({}) == webhook::VerifyStatus::NoMatchingSignature);
}

TEST_CASE("secrets parse as tenant=whsec_<base64> lists and bad ones are refused") {
  const auto keys = webhook::parse_secrets(kSecretsSpec);
  REQUIRE(keys.size() == 3);
  CHECK(keys[0].tenant == "tenant-a");
  CHECK(keys[1].tenant == "tenant-a");
  CHECK(keys[2].tenant == "tenant-b");
  CHECK(keys[1].secret == bytes("tenant-a rotated secret, 32 byte"));
  CHECK_THROWS_AS(webhook::parse_secrets(""), std::invalid_argument);
  CHECK_THROWS_AS(webhook::parse_secrets("tenant-a"), std::invalid_argument);
  CHECK_THROWS_AS(webhook::parse_secrets("=" + kSecretA1), std::invalid_argument);
  CHECK_THROWS_AS(webhook::parse_secrets("t=" + kSecretA1.substr(6)), std::invalid_argument);
  CHECK_THROWS_AS(webhook::parse_secrets("t=whsec_%%%"), std::invalid_argument);
  CHECK_THROWS_AS(webhook::parse_secrets("t=whsec_"), std::invalid_argument);
  CHECK_THROWS_AS(webhook::parse_secrets("a=" + kSecretA1 + ",b=" + kSecretA1), std::invalid_argument);

  std::vector<std::uint8_t> out;
  CHECK(webhook::base64_decode("aGk=", out));
  CHECK(out == bytes("hi"));
  CHECK(webhook::base64_decode("aGk", out));  // unpadded
  CHECK(out == bytes("hi"));
  CHECK_FALSE(webhook::base64_decode("aGl=", out));  // non-zero trailing bits
  CHECK_FALSE(webhook::base64_decode("a", out));
  CHECK(webhook::base64_encode(bytes("hi!?")) == "aGkhPw==");
}

// ================================================================ HTTP integration tests

TEST_CASE("a correctly signed delivery is accepted with 202 and stored PENDING under the key's tenant") {
  WebhookFixture f;
  // The body claims another tenant: only the verifying key decides.
  const std::string body =
      R"({"type":"order.created","version":2,"tenant":"tenant-b","data":{"orderId":"o-42","total":99.5}})";
  Delivery d{.id = "evt-1001", .body = body};
  const HttpResponse r = post(f.port(), d.signed_with({kSecretA1}));
  INFO(r.body);
  REQUIRE(r.status == 202);
  CHECK(r.json()["result"] == "accepted");
  CHECK(r.json()["receipt"]["status"] == "PENDING");

  const pqxx::result rows = f.db.query(
      "SELECT id, scope_kind, scope_id, source, consumer, message_id, event_type, schema_version, "
      "payload::text, status FROM {schema}.inbox_receipts");
  REQUIRE(rows.size() == 1);
  CHECK(rows[0][0].as<std::int64_t>() == r.json()["receipt"]["id"].get<std::int64_t>());
  CHECK(rows[0][1].as<std::string>() == "tenant");
  CHECK(rows[0][2].as<std::string>() == "tenant-a");
  CHECK(rows[0][3].as<std::string>() == "webhook:orders");
  CHECK(rows[0][4].as<std::string>() == "orders.projection.v1");
  CHECK(rows[0][5].as<std::string>() == "evt-1001");
  CHECK(rows[0][6].as<std::string>() == "order.created");
  CHECK(rows[0][7].as<int>() == 2);
  CHECK(Json::parse(rows[0][8].as<std::string>()) == Json{{"orderId", "o-42"}, {"total", 99.5}});
  CHECK(rows[0][9].as<std::string>() == "PENDING");
}

TEST_CASE("a redelivery of the same webhook is acknowledged with 200 as a duplicate of the same receipt") {
  WebhookFixture f;
  Delivery d{.id = "evt-dup", .body = order_created("o-1")};
  d.signed_with({kSecretA1});
  const HttpResponse first = post(f.port(), d);
  REQUIRE(first.status == 202);
  // A sender's retry: a new timestamp and signature, the same id and body.
  Delivery again{.id = "evt-dup", .timestamp = now_timestamp(1s), .body = order_created("o-1")};
  const HttpResponse second = post(f.port(), again.signed_with({kSecretA2}));
  INFO(second.body);
  REQUIRE(second.status == 200);
  CHECK(second.json()["result"] == "duplicate");
  CHECK(second.json()["receipt"]["id"] == first.json()["receipt"]["id"]);
  CHECK(f.receipts() == 1);
}

TEST_CASE("the same webhook-id with a different body is rejected with 409 IDENTITY_CONFLICT") {
  WebhookFixture f;
  Delivery d{.id = "evt-conflict", .body = order_created("o-1", 10)};
  REQUIRE(post(f.port(), d.signed_with({kSecretA1})).status == 202);
  Delivery other{.id = "evt-conflict", .body = order_created("o-1", 11)};
  const HttpResponse r = post(f.port(), other.signed_with({kSecretA1}));
  INFO(r.body);
  CHECK(r.status == 409);
  CHECK(r.json()["error"] == "IDENTITY_CONFLICT");
  CHECK(f.receipts() == 1);
  CHECK(f.db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE payload->>'total' = '10'") == 1);

  // The same id from another tenant is another identity, not a conflict.
  Delivery b{.id = "evt-conflict", .body = order_created("o-1", 11)};
  CHECK(post(f.port(), b.signed_with({kSecretB})).status == 202);
}

TEST_CASE("a bad or missing signature is rejected with 401 and nothing is stored") {
  WebhookFixture f;
  Delivery d{.id = "evt-bad", .body = order_created("o-1")};

  SECTION("signed with an unknown secret") { d.signed_with({kUnknownSecret}); }
  SECTION("body tampered after signing") {
    d.signed_with({kSecretA1});
    d.body = order_created("o-1", 1000);
  }
  SECTION("no signature header") { d.signature.clear(); }
  SECTION("no webhook-id header") {
    d.signed_with({kSecretA1});
    d.id.clear();
  }
  SECTION("a garbage signature") { d.signature = "v1,xyz"; }

  const HttpResponse r = post(f.port(), d);
  INFO(r.body);
  CHECK(r.status == 401);
  CHECK(r.json()["error"] == "UNAUTHORIZED");
  CHECK(f.receipts() == 0);
}

TEST_CASE("a delivery signed ten minutes ago is rejected with 401 as stale") {
  WebhookFixture f;
  Delivery d{.id = "evt-old", .timestamp = now_timestamp(-600s), .body = order_created("o-1")};
  const HttpResponse r = post(f.port(), d.signed_with({kSecretA1}));
  INFO(r.body);
  CHECK(r.status == 401);
  CHECK(r.json()["message"] == "stale_timestamp");
  CHECK(f.receipts() == 0);
}

TEST_CASE("a delivery signed only with the rotated second secret verifies for the same tenant") {
  WebhookFixture f;
  Delivery d{.id = "evt-rotated", .body = order_created("o-7")};
  const HttpResponse r = post(f.port(), d.signed_with({kSecretA2}));
  INFO(r.body);
  REQUIRE(r.status == 202);
  CHECK(f.db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_id = 'tenant-a' AND "
                   "message_id = 'evt-rotated'") == 1);

  // A sender mid-rotation sends both; tenant-b's key maps to tenant-b.
  Delivery both{.id = "evt-both", .body = order_created("o-8")};
  CHECK(post(f.port(), both.signed_with({kSecretA1, kSecretA2})).status == 202);
  Delivery b{.id = "evt-b", .body = order_created("o-9")};
  CHECK(post(f.port(), b.signed_with({kSecretB})).status == 202);
  CHECK(f.db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_id = 'tenant-b'") == 1);
}

TEST_CASE("an invalid body is rejected with 400 naming the field, and nothing is stored") {
  WebhookFixture f;
  struct Case {
    std::string body;
    std::string field;
  };
  const Case c = GENERATE(values<Case>({
      {R"({"type":"order.created","data":)", "body/data"},                           // not JSON
      {R"({"type":"a","type":"b","data":{}})", "body/type"},                         // duplicate key
      {R"([1,2,3])", "body"},                                                        // not an object
      {R"({"data":{"orderId":"o-1"}})", "type"},                                     // missing type
      {R"({"type":7,"data":{}})", "type"},                                           // type not a string
      {R"({"type":"","data":{}})", "type"},                                          // InboxValidationError
      {R"({"type":"order.created","version":"1","data":{}})", "version"},            // not an integer
      {R"({"type":"order.created","version":0,"data":{}})", "version"},              // InboxValidationError
      {R"({"type":"order.created"})", "data"},                                       // missing data
      {R"({"type":"order.created","data":{"n":9007199254740993}})", "body/data/n"},  // unsafe integer
  }));
  Delivery d{.id = "evt-invalid", .body = c.body};
  const HttpResponse r = post(f.port(), d.signed_with({kSecretA1}));
  INFO(c.body << " -> " << r.body);
  CHECK(r.status == 400);
  CHECK(r.json()["field"] == c.field);
  CHECK(f.receipts() == 0);
}

TEST_CASE("an over-long webhook-id is rejected with 400 naming webhook-id") {
  WebhookFixture f;
  Delivery d{.id = std::string(1000, 'x'), .body = order_created("o-1")};
  const HttpResponse r = post(f.port(), d.signed_with({kSecretA1}));
  INFO(r.body);
  CHECK(r.status == 400);
  CHECK(r.json()["field"] == "webhook-id");
  CHECK(r.json()["inbox_field"] == "message_id");
}

TEST_CASE("a body over 1 MiB is refused with 413 and nothing is stored") {
  WebhookFixture f;
  // Correctly signed and valid JSON: only the size is wrong. The server answers from
  // Content-Length without reading the body (civetweb then discards what was sent).
  const std::string filler(1024 * 1024, 'x');
  Delivery d{.id = "evt-big", .body = Json{{"type", "order.created"}, {"data", {{"filler", filler}}}}.dump()};
  const HttpResponse r = post(f.port(), d.signed_with({kSecretA1}));
  INFO(r.body);
  CHECK(r.status == 413);
  CHECK(r.json()["error"] == "BODY_TOO_LARGE");
  CHECK(f.receipts() == 0);
}

TEST_CASE("only POST /webhooks/orders is served") {
  WebhookFixture f;
  Delivery d{.id = "evt-get", .body = ""};
  CHECK(http_request(f.port(), request_text(d, "GET")).status == 405);
  CHECK(http_request(f.port(), request_text(d, "POST", "/webhooks/orders/extra")).status == 404);
  CHECK(http_request(f.port(), request_text(d, "POST", "/elsewhere")).status == 404);
}

TEST_CASE("an unreachable database answers 503 with Retry-After and the sender's retry is accepted later") {
  WebhookFixture f;
  // A second server whose inbox points at a port where no PostgreSQL listens.
  auto dead_pool = boxcar::ConnectionPool::create(
      {.url = "postgresql://boxcar@127.0.0.1:" + std::to_string(dead_port()) + "/boxcar?connect_timeout=2",
       .acquire_timeout = 2000ms});
  boxcar::Inbox dead_inbox(dead_pool, {.schema = f.db.schema(), .consumers = {"orders.projection.v1"}});
  webhook::Server dead{dead_inbox, {.listen = "127.0.0.1:0", .keys = webhook::parse_secrets(kSecretsSpec)}};

  Delivery d{.id = "evt-retry", .body = order_created("o-1")};
  d.signed_with({kSecretA1});
  const HttpResponse r = post(dead.port(), d);
  INFO(r.body);
  CHECK(r.status == 503);
  CHECK(r.headers.count("retry-after") == 1);
  CHECK(r.json()["error"] == "STORAGE_FAILURE");
  CHECK(f.receipts() == 0);

  // The sender redelivers the same webhook (same id, fresh signature) once storage is back.
  Delivery retry{.id = "evt-retry", .timestamp = now_timestamp(5s), .body = d.body};
  const HttpResponse ok = post(f.port(), retry.signed_with({kSecretA1}));
  INFO(ok.body);
  CHECK(ok.status == 202);
  CHECK(f.receipts() == 1);
}

TEST_CASE("the example_webhook binary migrates its schema, serves a signed delivery and stops on SIGTERM") {
  boxcar::testing::TestSchema db;  // for its URL and cleanup; the binary migrates its own schema
  const std::string schema = db.schema() + "_bin";
  const int port = dead_port();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("BOXCAR_DATABASE_URL", db.url().c_str(), 1);
    ::setenv("BOXCAR_SCHEMA", schema.c_str(), 1);
    ::setenv("WEBHOOK_LISTEN", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    ::setenv("WEBHOOK_SECRETS", kSecretsSpec.c_str(), 1);
    ::setenv("WEBHOOK_CONSUMER", "orders.projection.v1", 1);
    ::execl(EXAMPLE_WEBHOOK_PATH, EXAMPLE_WEBHOOK_PATH, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  struct Cleanup {
    pid_t pid;
    const boxcar::testing::TestSchema& db;
    std::string schema;
    ~Cleanup() {
      if (pid > 0) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
      }
      try {
        db.query("DROP SCHEMA IF EXISTS \"" + schema + "\" CASCADE");
      } catch (...) {
      }
    }
  } cleanup{pid, db, schema};

  Delivery d{.id = "evt-bin", .body = order_created("o-1")};
  d.signed_with({kSecretB});
  HttpResponse r;
  for (int attempt = 0;; ++attempt) {
    try {
      r = post(port, d);
      break;
    } catch (const std::runtime_error&) {
      int status = 0;
      REQUIRE(::waitpid(pid, &status, WNOHANG) == 0);  // still running
      REQUIRE(attempt < 300);                          // 15 s
      std::this_thread::sleep_for(50ms);
    }
  }
  INFO(r.body);
  CHECK(r.status == 202);
  CHECK(db.count("SELECT count(*) FROM \"" + schema + "\".inbox_receipts WHERE scope_id = 'tenant-b'") == 1);

  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = 0;
  bool exited = false;
  for (int i = 0; i < 200 && !exited; ++i) {
    exited = ::waitpid(pid, &status, WNOHANG) == pid;
    if (!exited) std::this_thread::sleep_for(50ms);
  }
  REQUIRE(exited);  // within 10 s
  cleanup.pid = 0;
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}
