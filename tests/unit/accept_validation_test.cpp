// Validation happens before accept() touches the database, so these tests run against a
// pool that never connects.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "boxcar/inbox/inbox.hpp"

using namespace boxcar;

namespace {

Inbox make_inbox() {
  auto pool = ConnectionPool::create({.url = "postgresql://nobody@127.0.0.1:1/none"});
  return Inbox(
      pool,
      {.consumers = {"orders.projection.v1"}, .payload_limits = {.max_depth = 4, .max_bytes = 256}, .notify = false});
}

AcceptRequest valid_request() {
  return {.scope = Scope::tenant("tenant-1"),
          .source = "orders-service",
          .consumer = "orders.projection.v1",
          .message_id = "m-1",
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"orderId", "o-1"}}};
}

void expect_invalid(const AcceptRequest& request, const std::string& code, const std::string& field) {
  Inbox inbox = make_inbox();
  try {
    inbox.accept(request);
    FAIL("expected InboxValidationError " << code);
  } catch (const InboxValidationError& e) {
    CHECK(e.code() == code);
    CHECK(e.field() == field);
  }
}

}  // namespace

TEST_CASE("empty identity fields are rejected naming the field") {
  auto r = valid_request();
  r.source = "";
  expect_invalid(r, "INBOX_FIELD_REQUIRED", "source");
  r = valid_request();
  r.consumer = "";
  expect_invalid(r, "INBOX_FIELD_REQUIRED", "consumer");
  r = valid_request();
  r.message_id = "";
  expect_invalid(r, "INBOX_FIELD_REQUIRED", "message_id");
  r = valid_request();
  r.event_type = "";
  expect_invalid(r, "INBOX_FIELD_REQUIRED", "event_type");
}

TEST_CASE("a tenant scope without an id and a global scope with one are rejected") {
  auto r = valid_request();
  r.scope = Scope::tenant("");
  expect_invalid(r, "INBOX_SCOPE_INVALID", "scope.id");
  r.scope = Scope{Scope::Kind::Global, "t"};
  expect_invalid(r, "INBOX_SCOPE_INVALID", "scope.id");
}

TEST_CASE("a consumer the inbox does not declare is rejected") {
  auto r = valid_request();
  r.consumer = "billing.v1";
  expect_invalid(r, "INBOX_UNKNOWN_CONSUMER", "consumer");
}

TEST_CASE("schema versions below one are rejected") {
  auto r = valid_request();
  r.schema_version = 0;
  expect_invalid(r, "INBOX_SCHEMA_VERSION_INVALID", "schema_version");
  r.schema_version = -3;
  expect_invalid(r, "INBOX_SCHEMA_VERSION_INVALID", "schema_version");
}

TEST_CASE("identity fields longer than 512 bytes are rejected, not truncated") {
  auto r = valid_request();
  r.message_id = std::string(513, 'x');
  expect_invalid(r, "INBOX_FIELD_TOO_LONG", "message_id");
}

TEST_CASE("identity fields with invalid UTF-8 or U+0000 are rejected") {
  auto r = valid_request();
  r.source = "bad\xff";
  expect_invalid(r, "INBOX_FIELD_INVALID", "source");
  r = valid_request();
  r.message_id = std::string("a\0b", 3);
  expect_invalid(r, "INBOX_FIELD_INVALID", "message_id");
}

TEST_CASE("payloads that are not plain JSON are rejected with their JSON path") {
  auto r = valid_request();
  r.payload = {{"price", std::numeric_limits<double>::quiet_NaN()}};
  expect_invalid(r, "JSON_NON_FINITE_NUMBER", "payload/price");

  r.payload = {{"items", {1, std::numeric_limits<double>::infinity()}}};
  expect_invalid(r, "JSON_NON_FINITE_NUMBER", "payload/items/1");

  r.payload = {{"big", 9007199254740992LL}};
  expect_invalid(r, "JSON_INTEGER_OUT_OF_RANGE", "payload/big");

  r.payload = {{"big", 1e17}};  // the value decides, not the type: a double is refused too
  expect_invalid(r, "JSON_INTEGER_OUT_OF_RANGE", "payload/big");

  r.payload = {{"blob", nlohmann::json::binary({1, 2, 3})}};
  expect_invalid(r, "JSON_UNSUPPORTED_VALUE", "payload/blob");

  r.payload = nlohmann::json(nlohmann::json::value_t::discarded);
  expect_invalid(r, "JSON_UNSUPPORTED_VALUE", "payload");

  r.payload = {{"name", "bad\xc3"}};
  expect_invalid(r, "JSON_INVALID_UTF8", "payload/name");
}

TEST_CASE("payload nesting beyond the configured depth is rejected") {
  auto r = valid_request();
  r.payload = {{"a", {{"b", {{"c", {1}}}}}}};  // depth 4: accepted by the limit of 4
  Inbox inbox = make_inbox();
  // Passes validation and only then fails to connect: proves validation let it through.
  CHECK_THROWS_AS(inbox.accept(r), InboxStorageError);
  r.payload = {{"a", {{"b", {{"c", {{"d", {1}}}}}}}}};  // depth 5
  expect_invalid(r, "JSON_TOO_DEEP", "payload/a/b/c/d");
}

TEST_CASE("payloads whose canonical form exceeds the size limit are rejected") {
  auto r = valid_request();
  r.payload = {{"text", std::string(300, 'x')}};
  // The path points at the value during whose output the limit was crossed.
  expect_invalid(r, "JSON_TOO_LARGE", "payload/text");
}

TEST_CASE("metadata headers must be valid UTF-8") {
  auto r = valid_request();
  r.metadata.headers["x-bad"] = "\xfe";
  expect_invalid(r, "JSON_INVALID_UTF8", "metadata/headers/x-bad");
}

TEST_CASE("an unreachable database is a storage failure that is not uncertain") {
  Inbox inbox = make_inbox();
  try {
    inbox.accept(valid_request());
    FAIL("expected InboxStorageError");
  } catch (const InboxStorageError& e) {
    CHECK(e.code() == "STORAGE_FAILURE");
    CHECK_FALSE(e.uncertain());
  }
}

TEST_CASE("an inbox must declare consumers") {
  auto pool = ConnectionPool::create({.url = "postgresql://nobody@127.0.0.1:1/none"});
  CHECK_THROWS_AS(Inbox(pool, {.consumers = {}}), ConfigError);
  CHECK_THROWS_AS(Inbox(pool, {.consumers = {""}}), ConfigError);
  CHECK_THROWS_AS(Inbox(pool, {.schema = "Bad", .consumers = {"c"}}), ConfigError);
}

TEST_CASE("validate refuses what accept refuses, without touching the database") {
  Inbox inbox = make_inbox();  // its pool points at a port where nothing listens
  CHECK_NOTHROW(inbox.validate(valid_request()));
  AcceptRequest r = valid_request();
  r.message_id.clear();
  try {
    inbox.validate(r);
    FAIL("expected InboxValidationError");
  } catch (const InboxValidationError& e) {
    CHECK(e.code() == "INBOX_FIELD_REQUIRED");
    CHECK(e.field() == "message_id");
  }
  r = valid_request();
  r.payload = nlohmann::json::parse("[[[[[1]]]]]");
  CHECK_THROWS_AS(inbox.validate(r), InboxValidationError);  // depth 5 > the inbox's payload limit of 4
}
