#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <thread>

#include "boxcar/core/canonical_json.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/testing/eventually.hpp"
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

namespace {

// Every text column of the row stored for `message_id`, payload and metadata as text.
pqxx::row stored_row(const TestDatabase& db, const std::string& message_id) {
  pqxx::connection c(db.url());
  pqxx::nontransaction tx(c);
  return tx.exec_params1(db.qualified("SELECT scope_id, source, consumer, message_id, event_type, payload::text, "
                                      "metadata::text, fingerprint FROM {schema}.inbox_receipts WHERE message_id = $1"),
                         message_id);
}

}  // namespace

TEST_CASE(
    "accept_many stores quotes, backslashes, braces, control characters and Unicode in every column exactly as "
    "accept does") {
  TestDatabase db;
  const std::string tricky = "q\"b\\s{,}\n\t\x01 NULL €😀";
  const std::string consumer = "orders \"v1\" \\ {x,y} ü";
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {consumer}, .notify = false});
  const auto make = [&](const std::string& id) {
    return AcceptRequest{.scope = Scope::tenant(tricky),
                         .source = "src " + tricky,
                         .consumer = consumer,
                         .message_id = id,
                         .event_type = "type " + tricky,
                         .schema_version = 7,
                         .payload = {{"k\"\\{}", tricky}, {"n", {1, "NULL", nullptr, "\\\"", "𝄞"}}},
                         .metadata = {.traceparent = tricky, .correlation_id = "c\\\"", .headers = {{"h\"", tricky}}}};
  };
  std::vector<AcceptRequest> batch = {make("many " + tricky), make("many \"2\"")};
  const auto results = inbox.accept_many(batch);
  REQUIRE(results[0].ok());
  REQUIRE(results[1].ok());
  CHECK(results[0].receipt().kind == Receipt::Kind::Accepted);
  CHECK(inbox.accept(make("single " + tricky)).kind == Receipt::Kind::Accepted);

  const auto many = stored_row(db, "many " + tricky);
  const auto single = stored_row(db, "single " + tricky);
  CHECK(many["scope_id"].as<std::string>() == tricky);
  CHECK(many["source"].as<std::string>() == "src " + tricky);
  CHECK(many["consumer"].as<std::string>() == consumer);
  CHECK(many["event_type"].as<std::string>() == "type " + tricky);
  CHECK(nlohmann::json::parse(many["payload"].as<std::string>()) == batch[0].payload);
  for (const char* column : {"scope_id", "source", "consumer", "event_type", "payload", "metadata", "fingerprint"}) {
    INFO(column);
    CHECK(many[column].as<std::string>() == single[column].as<std::string>());
  }
  // Redelivered through either path, the identity and its content match.
  CHECK(inbox.accept(make("many " + tricky)).kind == Receipt::Kind::Duplicate);
  std::vector<AcceptRequest> again = {make("single " + tricky), make("many \"2\"")};
  for (const auto& r : inbox.accept_many(again)) CHECK(r.receipt().kind == Receipt::Kind::Duplicate);
}

TEST_CASE(
    "a 1000-item batch mixing new, stored, repeated, conflicting and invalid items gets the right result for "
    "each") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  // 100 identities stored before, by an earlier batch.
  std::vector<AcceptRequest> earlier;
  for (int i = 0; i < 100; ++i) earlier.push_back(item("m-" + std::to_string(i * 10), 1));
  std::vector<std::int64_t> earlier_ids;
  for (const auto& r : inbox.accept_many(earlier)) earlier_ids.push_back(r.receipt().id);

  std::vector<AcceptRequest> batch;
  for (int i = 999; i >= 0; --i) {  // input order is the reverse of identity order
    const std::string id = "m-" + std::to_string(i);
    if (i % 100 == 0) {
      batch.push_back(item(id, 2));  // stored with value 1: a conflict
    } else if (i % 37 == 0) {
      auto bad = item(id);
      bad.consumer = "undeclared";
      batch.push_back(bad);
    } else {
      batch.push_back(item(id, 1));
    }
  }
  batch.push_back(item("m-1", 1));  // a repeat of an earlier item of this batch
  batch.push_back(item("m-2", 5));  // a repeat with other content
  REQUIRE(batch.size() == 1002);
  const auto results = inbox.accept_many(batch);
  REQUIRE(results.size() == batch.size());
  int accepted = 0;
  for (std::size_t k = 0; k < 1000; ++k) {
    const int i = 999 - static_cast<int>(k);
    INFO(batch[k].message_id);
    if (i % 100 == 0) {
      CHECK(results[k].error_code() == "IDENTITY_CONFLICT");
    } else if (i % 37 == 0) {
      CHECK(results[k].error_code() == "INBOX_UNKNOWN_CONSUMER");
    } else if (i % 10 == 0) {
      REQUIRE(results[k].ok());
      CHECK(results[k].receipt().kind == Receipt::Kind::Duplicate);
      CHECK(results[k].receipt().id == earlier_ids[static_cast<std::size_t>(i / 10)]);
    } else {
      REQUIRE(results[k].ok());
      CHECK(results[k].receipt().kind == Receipt::Kind::Accepted);
      ++accepted;
    }
  }
  CHECK(results[1000].receipt().kind == Receipt::Kind::Duplicate);
  CHECK(results[1000].receipt().id == results[998].receipt().id);  // m-1 is at input position 998
  CHECK(results[1001].error_code() == "IDENTITY_CONFLICT");
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 100 + accepted);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE payload->>'value' <> '1'") == 0);
}

TEST_CASE(
    "an identity committed by a concurrent transaction while accept_many waits on it is returned as that "
    "transaction's row") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  const auto same = item("contended", 1);
  const auto other = item("contended-other", 1);
  const std::string payload = canonicalize(same.payload);
  const std::string same_fingerprint = content_fingerprint(same.event_type, same.schema_version, payload);
  const std::string other_fingerprint = content_fingerprint(same.event_type, same.schema_version + 1, payload);

  // The other writer inserts both identities and holds its transaction open: accept_many's
  // insert waits on them, and their rows commit after its statement's snapshot was taken.
  pqxx::connection writer(db.url());
  pqxx::work tx(writer);
  const auto insert = [&](const AcceptRequest& r, const std::string& fingerprint) {
    return tx
        .exec_params1(db.qualified("INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, "
                                   "message_id, event_type, schema_version, payload, fingerprint) "
                                   "VALUES ('tenant', 't-1', $1, $2, $3, $4, 1, $5::jsonb, $6) RETURNING id"),
                      r.source, r.consumer, r.message_id, r.event_type, payload, fingerprint)[0]
        .as<std::int64_t>();
  };
  const std::int64_t same_id = insert(same, same_fingerprint);
  const std::int64_t other_id = insert(other, other_fingerprint);

  std::vector<AcceptRequest> batch = {item("before"), same, other, item("zafter")};
  std::vector<AcceptResult> results;
  std::exception_ptr error;
  std::thread accepting([&] {
    try {
      results = inbox.accept_many(batch);
    } catch (...) {
      error = std::current_exception();
    }
  });
  const bool waited = boxcar::testing::eventually([&] {
    return db.scalar(
               "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE wait_event_type = 'Lock' "
               "AND query LIKE '%INSERT INTO {schema}.inbox_receipts%WITH ORDINALITY%'") == 1;
  });
  tx.commit();
  accepting.join();
  if (error) std::rethrow_exception(error);
  REQUIRE(waited);
  REQUIRE(results.size() == 4);
  CHECK(results[0].receipt().kind == Receipt::Kind::Accepted);
  CHECK(results[1].receipt().kind == Receipt::Kind::Duplicate);
  CHECK(results[1].receipt().id == same_id);
  CHECK(results[2].error_code() == "IDENTITY_CONFLICT");
  CHECK(results[3].receipt().kind == Receipt::Kind::Accepted);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 4);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'contended-other' AND id = " +
                  std::to_string(other_id) + " AND schema_version = 1") == 1);
}

TEST_CASE(
    "concurrent 1000-item batches over the same identities in different orders, split over several statements, "
    "never deadlock and record each identity once") {
  TestDatabase db;
  auto pool = ConnectionPool::create({.url = db.url(), .size = 4});
  // A few dozen items per statement: each batch runs as dozens of statements in one transaction.
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"orders.v1"}, .max_statement_bytes = 8192, .notify = false});
  std::atomic<int> accepted{0};
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  // Strides coprime with 1000: each batch is all 1000 identities, in its own order.
  constexpr int kStride[] = {1, 3, 7, 9};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        std::vector<AcceptRequest> batch;
        for (int i = 0; i < 1000; ++i)
          batch.push_back(item("id-" + std::to_string((i * kStride[t] + 7 * round) % 1000)));
        try {
          for (const auto& r : inbox.accept_many(batch)) {
            if (!r.ok())
              ++failures;
            else if (r.receipt().kind == Receipt::Kind::Accepted)
              ++accepted;
          }
        } catch (...) {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(accepted == 1000);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1000);
}

TEST_CASE("metadata without headers is stored as the JSON object of its set fields, plain or escaped") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  const std::vector<Metadata> cases = {
      // Plain text, non-ASCII and U+007F included: written directly.
      {.traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", .correlation_id = "corr é 😀\x7f"},
      {.tracestate = "k=v", .causation_id = "cause"},
      // Text to escape: the general path.
      {.traceparent = "q\"b\\s\n\x01", .correlation_id = "plain"},
      {},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    INFO("case " << i);
    auto request = item("meta-" + std::to_string(i));
    request.metadata = cases[i];
    REQUIRE(inbox.accept(request).kind == Receipt::Kind::Accepted);
    nlohmann::json expected = nlohmann::json::object();
    const auto put = [&](const char* name, const std::string& value) {
      if (!value.empty()) expected[name] = value;
    };
    put("causationId", cases[i].causation_id);
    put("correlationId", cases[i].correlation_id);
    put("traceparent", cases[i].traceparent);
    put("tracestate", cases[i].tracestate);
    CHECK(nlohmann::json::parse(stored_row(db, "meta-" + std::to_string(i))["metadata"].as<std::string>()) == expected);
  }
}

TEST_CASE("accept_many stores payloads of every JSON kind, top-level scalars included, as accept does") {
  TestDatabase db;
  Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {"orders.v1"}, .notify = false});
  // A statement's payloads travel as one JSON array: each element must come back as the
  // payload it was, whatever its kind, and a top-level null must stay a JSON null.
  const std::vector<nlohmann::json> payloads = {nullptr,
                                                0,
                                                -12.5,
                                                "plain",
                                                "q\"b\\s,]}",
                                                true,
                                                nlohmann::json::array(),
                                                nlohmann::json::object(),
                                                {1, {2, {3}}},
                                                {{"a", nlohmann::json::array()}, {"b", {{"c", nullptr}}}}};
  const auto make = [&](const std::string& path, std::size_t k) {
    return AcceptRequest{.scope = Scope::tenant("t-1"),
                         .source = "src",
                         .consumer = "orders.v1",
                         .message_id = path + "-" + std::to_string(k),
                         .event_type = "order.created",
                         .schema_version = 1,
                         .payload = payloads[k]};
  };
  std::vector<AcceptRequest> batch;
  for (std::size_t k = 0; k < payloads.size(); ++k) batch.push_back(make("many", k));
  for (const auto& r : inbox.accept_many(batch)) CHECK(r.receipt().kind == Receipt::Kind::Accepted);
  for (std::size_t k = 0; k < payloads.size(); ++k) {
    INFO(payloads[k].dump());
    CHECK(inbox.accept(make("single", k)).kind == Receipt::Kind::Accepted);
    const auto many = stored_row(db, "many-" + std::to_string(k));
    const auto single = stored_row(db, "single-" + std::to_string(k));
    CHECK_FALSE(many["payload"].is_null());
    CHECK(nlohmann::json::parse(many["payload"].as<std::string>()) == payloads[k]);
    CHECK(many["payload"].as<std::string>() == single["payload"].as<std::string>());
    CHECK(many["metadata"].as<std::string>() == single["metadata"].as<std::string>());
    CHECK(many["fingerprint"].as<std::string>() == single["fingerprint"].as<std::string>());
  }
  // Their redeliveries are duplicates, not conflicts: the stored content is the same.
  for (const auto& r : inbox.accept_many(batch)) CHECK(r.receipt().kind == Receipt::Kind::Duplicate);
}
