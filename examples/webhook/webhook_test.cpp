// The webhook example's tests: verify() on its own (no database), then every row of the
// response table with real HTTP requests over loopback against an in-process server on a
// free port, backed by a fresh TestSchema schema. Abuse limits: webhook_abuse_test.cpp.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "webhook_test_support.hpp"

using namespace std::chrono_literals;
using namespace webhook_test;

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

TEST_CASE("verify computes one HMAC per candidate key, and none when the headers are refused") {
  const auto keys = webhook::parse_secrets(kSecretsSpec);
  const auto now = std::chrono::system_clock::now();
  const std::string ts =
      std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count());
  const std::string body(64 * 1024, 'x');
  const std::string sig = webhook::sign(webhook::decode_secret(kUnknownSecret), "evt-1", ts, body);
  const webhook::VerifyInput input{.id = "evt-1", .timestamp = ts, .signature = sig, .body = body};

  CHECK(webhook::verify(keys, input, now).keys_tried == keys.size());
  CHECK(webhook::verify(std::span(keys).first(1), input, now).keys_tried == 1);
  const webhook::VerifyResult none = webhook::verify({}, input, now);
  CHECK(none.status == webhook::VerifyStatus::NoMatchingSignature);
  CHECK(none.keys_tried == 0);

  webhook::VerifyInput stale = input;
  const std::string old = std::to_string(std::stoll(ts) - 3600);
  stale.timestamp = old;
  CHECK(webhook::verify(keys, stale, now).keys_tried == 0);
  CHECK(webhook::check_headers(stale, now) == webhook::VerifyStatus::StaleTimestamp);
  webhook::VerifyInput garbage = input;
  garbage.signature = "v1,not-base64!";
  CHECK(webhook::verify(keys, garbage, now).keys_tried == 0);
  CHECK_FALSE(webhook::check_headers(input, now).has_value());
}

TEST_CASE("a key ring hands out only the named tenant's secrets, and none for an unknown key id") {
  const webhook::KeyRing ring(many_tenants(50));
  CHECK(ring.tenant_count() == 52);
  const auto a = ring.keys_for("tenant-a");
  REQUIRE(a.size() == 2);
  CHECK(a[0].secret == webhook::decode_secret(kSecretA1));
  CHECK(a[1].secret == webhook::decode_secret(kSecretA2));
  CHECK(ring.keys_for("tenant-7").size() == 1);
  CHECK(ring.keys_for("tenant-7")[0].tenant == "tenant-7");
  CHECK(ring.keys_for("tenant-zz").empty());
  CHECK(ring.keys_for("").empty());
  CHECK(ring.keys_for("TENANT-A").empty());  // key ids are exact
  CHECK_THROWS_AS(webhook::KeyRing({}), std::invalid_argument);

  CHECK(webhook::valid_key_id("tenant_A.2-x"));
  CHECK(webhook::valid_key_id(std::string(64, 't')));
  for (const std::string& bad :
       std::vector<std::string>{"", ".", "..", "a/b", "a b", "a%2F", std::string(65, 't'), std::string("a\0b", 3)})
    CHECK_FALSE(webhook::valid_key_id(bad));
  CHECK_THROWS_AS(webhook::parse_secrets("ten ant=" + kSecretA1), std::invalid_argument);
  CHECK_THROWS_AS(webhook::parse_secrets("a/b=" + kSecretA1), std::invalid_argument);
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
  Delivery b{.id = "evt-conflict", .body = order_created("o-1", 11), .tenant = "tenant-b"};
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
  SECTION("signed with tenant-b's key but sent to tenant-a's URL") { d.signed_with({kSecretB}); }
  SECTION("a tenant that is not configured") {
    d.signed_with({kSecretA1});
    d.tenant = "tenant-zz";
  }

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
  Delivery b{.id = "evt-b", .body = order_created("o-9"), .tenant = "tenant-b"};
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

TEST_CASE("only POST /webhooks/orders/<tenant> is served") {
  WebhookFixture f;
  Delivery d{.id = "evt-get", .body = ""};
  CHECK(http_request(f.port(), request_text(d, "GET")).status == 405);
  CHECK(http_request(f.port(), request_text(d, "POST", "/webhooks/orders")).status == 404);
  CHECK(http_request(f.port(), request_text(d, "POST", "/webhooks/orders/")).status == 404);
  CHECK(http_request(f.port(), request_text(d, "POST", "/webhooks/orders/tenant-a/extra")).status == 404);
  CHECK(http_request(f.port(), request_text(d, "POST", "/webhooks/orders/ten%20ant")).status == 404);
  CHECK(http_request(f.port(), request_text(d, "POST", "/elsewhere")).status == 404);
  const HttpResponse unknown = http_request(f.port(), request_text(d, "POST", "/webhooks/orders/extra"));
  CHECK(unknown.status == 401);
  CHECK(unknown.json()["message"] == "unknown_key_id");
}

TEST_CASE("an unreachable database answers 503 with Retry-After and the sender's retry is accepted later") {
  WebhookFixture f;
  // A second server whose inbox points at a port where no PostgreSQL listens.
  auto dead_pool = boxcar::ConnectionPool::create(
      {.url = "postgresql://boxcar@127.0.0.1:" + std::to_string(dead_port()) + "/boxcar?connect_timeout=2",
       .acquire_timeout = 2000ms});
  boxcar::Inbox dead_inbox(dead_pool, {.schema = f.db.schema(), .consumers = {"orders.projection.v1"}});
  webhook::Server dead{dead_inbox, options_with(webhook::parse_secrets(kSecretsSpec))};

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

namespace {

// `example_webhook migrate` as its own process, as a deployment runs it before the endpoint.
int run_migrate(const std::string& url, const std::string& schema) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setenv("BOXCAR_DATABASE_URL", url.c_str(), 1);
    ::setenv("BOXCAR_SCHEMA", schema.c_str(), 1);
    ::execl(EXAMPLE_WEBHOOK_PATH, EXAMPLE_WEBHOOK_PATH, "migrate", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("after example_webhook migrate, the binary serves a signed delivery and stops on SIGTERM") {
  boxcar::testing::TestSchema db;  // for its URL and cleanup
  const std::string schema = db.schema() + "_bin";
  REQUIRE(run_migrate(db.url(), schema) == 0);
  const int port = dead_port();
  const pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::setenv("BOXCAR_DATABASE_URL", db.url().c_str(), 1);
    ::setenv("BOXCAR_SCHEMA", schema.c_str(), 1);
    ::setenv("WEBHOOK_LISTEN", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    ::setenv("WEBHOOK_SECRETS", kSecretsSpec.c_str(), 1);
    ::setenv("WEBHOOK_CONSUMER", "orders.projection.v1", 1);
    ::setenv("WEBHOOK_THREADS", "16", 1);
    ::setenv("WEBHOOK_MAX_CONNECTIONS_PER_CLIENT", "4", 1);
    ::setenv("WEBHOOK_HEADER_TIMEOUT_MS", "2000", 1);
    ::setenv("WEBHOOK_BODY_TIMEOUT_MS", "3000", 1);
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

  Delivery d{.id = "evt-bin", .body = order_created("o-1"), .tenant = "tenant-b"};
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
