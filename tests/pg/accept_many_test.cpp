#include <catch2/catch.hpp>

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
