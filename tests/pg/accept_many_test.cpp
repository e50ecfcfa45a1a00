#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::TestDatabase;

namespace {

AcceptRequest item(const std::string& id, int value = 1) {
  return {.scope = Scope::tenant("t-1"),
          .source = "kafka:orders",
          .consumer = "orders.v1",
          .message_id = id,
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"value", value}}};
}

}  // namespace

TEST_CASE("accept_many returns one result per item in input order") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  const Receipt existing = inbox.accept(item("old"));
  std::vector<AcceptRequest> batch = {item("a"), item("old"), item("b")};
  const auto results = inbox.accept_many(batch);
  REQUIRE(results.size() == 3);
  CHECK(results[0].receipt().kind == Receipt::Kind::Accepted);
  CHECK(results[1].receipt().kind == Receipt::Kind::Duplicate);
  CHECK(results[1].receipt().id == existing.id);
  CHECK(results[2].receipt().kind == Receipt::Kind::Accepted);
  CHECK(results[0].receipt().id != results[2].receipt().id);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'a' AND id = " +
                  std::to_string(results[0].receipt().id)) == 1);
}

TEST_CASE("repeats inside one batch collapse onto one receipt") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  std::vector<AcceptRequest> batch = {item("a"), item("a"), item("b"), item("a")};
  const auto results = inbox.accept_many(batch);
  CHECK(results[0].receipt().kind == Receipt::Kind::Accepted);
  CHECK(results[1].receipt().kind == Receipt::Kind::Duplicate);
  CHECK(results[3].receipt().kind == Receipt::Kind::Duplicate);
  CHECK(results[1].receipt().id == results[0].receipt().id);
  CHECK(results[3].receipt().id == results[0].receipt().id);
  CHECK(results[2].receipt().kind == Receipt::Kind::Accepted);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 2);
}

TEST_CASE("a bad item fails alone: conflicts and validation errors are per item") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  inbox.accept(item("stored", 1));
  auto invalid = item("bad");
  invalid.schema_version = 0;
  std::vector<AcceptRequest> batch = {item("x"), item("stored", 2), invalid, item("x", 9), item("y")};
  const auto results = inbox.accept_many(batch);
  REQUIRE(results.size() == 5);
  CHECK(results[0].receipt().kind == Receipt::Kind::Accepted);
  CHECK_FALSE(results[1].ok());
  CHECK(results[1].error_code() == "IDENTITY_CONFLICT");
  CHECK_THROWS_AS(results[1].rethrow_if_error(), InboxConflictError);
  CHECK_FALSE(results[2].ok());
  CHECK(results[2].error_code() == "INBOX_SCHEMA_VERSION_INVALID");
  CHECK_THROWS_AS(results[2].receipt(), InboxValidationError);
  // A repeat inside the batch with other content conflicts with the first occurrence.
  CHECK(results[3].error_code() == "IDENTITY_CONFLICT");
  CHECK(results[4].receipt().kind == Receipt::Kind::Accepted);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'stored' "
                  "AND payload->>'value' = '1'") == 1);
}

TEST_CASE("a batch of only invalid items touches nothing") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  auto bad = item("a");
  bad.source = "";
  std::vector<AcceptRequest> batch = {bad};
  const auto results = inbox.accept_many(batch);
  CHECK(results[0].error_code() == "INBOX_FIELD_REQUIRED");
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 0);
}

TEST_CASE("overlapping batches from many threads record each identity exactly once") {
  TestDatabase db;
  auto pool = ConnectionPool::create({.url = db.url(), .size = 8});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  std::atomic<int> accepted{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 10; ++round) {
        std::vector<AcceptRequest> batch;
        // Every thread covers the same 50 identities, in a different order.
        for (int i = 0; i < 50; ++i) batch.push_back(item("id-" + std::to_string((i * (t + 1) + round) % 50)));
        try {
          for (const auto& r : inbox.accept_many(batch))
            if (r.ok() && r.receipt().kind == Receipt::Kind::Accepted) ++accepted;
        } catch (...) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(accepted == 50);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 50);
}

TEST_CASE("accept_many stores identities with quotes, backslashes, control characters and Unicode exactly") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  const std::string tricky = "q\"b\\s\n\t\x01 €😀";
  auto request = item(tricky);
  request.source = "src \"quoted\" \\ ü";
  std::vector<AcceptRequest> batch = {request};
  const auto results = inbox.accept_many(batch);
  REQUIRE(results[0].ok());
  CHECK(results[0].receipt().kind == Receipt::Kind::Accepted);
  pqxx::connection c(db.url());
  pqxx::nontransaction tx(c);
  const auto row = tx.exec_params1(db.qualified("SELECT message_id, source FROM {schema}.inbox_receipts"));
  CHECK(row[0].as<std::string>() == tricky);
  CHECK(row[1].as<std::string>() == request.source);
  // The single-message path sees the same identity.
  CHECK(inbox.accept(request).kind == Receipt::Kind::Duplicate);
}

namespace {

// An item whose record is about `bytes` long (payload padding; identity and metadata small).
AcceptRequest padded(const std::string& id, std::size_t bytes) {
  auto request = item(id);
  request.payload = {{"pad", std::string(bytes, 'x')}};
  return request;
}

}  // namespace

TEST_CASE("a batch larger than the statement budget is accepted whole, one result per item in input order") {
  TestDatabase db;
  // 4 KiB per statement: 60 items of about 600 bytes need about ten statements.
  Inbox inbox(db.pool(),
              {.schema = db.schema(), .consumers = {"orders.v1"}, .max_statement_bytes = 4096, .notify = false});
  const Receipt existing = inbox.accept(padded("m-030", 300));
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < 60; ++i) {
    char id[16];
    std::snprintf(id, sizeof id, "m-%03d", (i * 37) % 60);  // input order differs from identity order
    batch.push_back(padded(id, 300));
  }
  batch.push_back(padded("m-005", 300));  // a repeat inside the batch, in another statement
  const auto results = inbox.accept_many(batch);
  REQUIRE(results.size() == 61);
  for (std::size_t i = 0; i < 60; ++i) {
    INFO(batch[i].message_id);
    REQUIRE(results[i].ok());
    CHECK(results[i].receipt().kind ==
          (batch[i].message_id == "m-030" ? Receipt::Kind::Duplicate : Receipt::Kind::Accepted));
    CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = '" + batch[i].message_id +
                    "' AND id = " + std::to_string(results[i].receipt().id)) == 1);
  }
  CHECK(results[60].receipt().kind == Receipt::Kind::Duplicate);
  const auto first = std::find_if(batch.begin(), batch.end(), [](const auto& r) { return r.message_id == "m-005"; });
  CHECK(results[60].receipt().id == results[first - batch.begin()].receipt().id);
  CHECK(results[60].receipt().id == db.scalar("SELECT id FROM {schema}.inbox_receipts WHERE message_id = 'm-005'"));
  const auto m030 = std::find_if(batch.begin(), batch.end(), [](const auto& r) { return r.message_id == "m-030"; });
  CHECK(results[m030 - batch.begin()].receipt().id == existing.id);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 60);
}

TEST_CASE("a batch split over several statements stays all-or-nothing: a failing last statement records nothing") {
  TestDatabase db;
  Inbox inbox(db.pool(),
              {.schema = db.schema(), .consumers = {"orders.v1"}, .max_statement_bytes = 4096, .notify = false});
  // A database-side fault on the identity that sorts last, so it is in the last statement.
  db.query(
      "CREATE FUNCTION {schema}.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
      "IF NEW.message_id = 'z-poison' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$");
  db.query(
      "CREATE TRIGGER refuse_poison BEFORE INSERT ON {schema}.inbox_receipts "
      "FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_poison()");
  std::vector<AcceptRequest> batch = {padded("z-poison", 300)};
  for (int i = 0; i < 30; ++i) batch.push_back(padded("a-" + std::to_string(i), 300));
  CHECK_THROWS_AS(inbox.accept_many(batch), InboxStorageError);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 0);
}

TEST_CASE("an item too large for any statement gets INBOX_ITEM_TOO_LARGE naming the payload, not a storage error") {
  TestDatabase db;
  Inbox inbox(db.pool(),
              {.schema = db.schema(), .consumers = {"orders.v1"}, .max_statement_bytes = 4096, .notify = false});
  std::vector<AcceptRequest> batch = {padded("small-1", 100), padded("huge", 8000), padded("small-2", 100)};
  const auto results = inbox.accept_many(batch);
  REQUIRE(results.size() == 3);
  CHECK(results[0].receipt().kind == Receipt::Kind::Accepted);
  CHECK(results[2].receipt().kind == Receipt::Kind::Accepted);
  REQUIRE_FALSE(results[1].ok());
  CHECK(results[1].error_code() == "INBOX_ITEM_TOO_LARGE");
  try {
    results[1].rethrow_if_error();
    FAIL("expected InboxValidationError");
  } catch (const InboxValidationError& e) {
    CHECK(e.field() == "payload");
  }
  // accept() applies the same limit, so both paths agree on what can be stored.
  try {
    inbox.accept(padded("huge", 8000));
    FAIL("expected InboxValidationError");
  } catch (const InboxValidationError& e) {
    CHECK(e.code() == "INBOX_ITEM_TOO_LARGE");
    CHECK(e.field() == "payload");
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 2);
}

TEST_CASE("the statement budget must be positive and within the jsonb ceiling") {
  TestDatabase db;
  for (const std::size_t bytes : {std::size_t{0}, kMaxStatementBytesCeiling + 1}) {
    try {
      Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .max_statement_bytes = bytes});
      FAIL("expected ConfigError");
    } catch (const ConfigError& e) {
      CHECK(e.key() == "inbox.max_statement_bytes");
    }
  }
}
