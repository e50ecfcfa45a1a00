// Real faults on the accept path: a connection lost after the server committed, before
// the request reached it, and a backend terminated mid-statement; for accept_many, the
// connection lost around its COMMIT, its autocommit insert and its lookup of stored rows.
#include <catch2/catch.hpp>

#include <regex>
#include <thread>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/testing/tcp_proxy.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::TcpProxy;
using boxcar::testing::TestDatabase;

namespace {

AcceptRequest request(const std::string& id) {
  return {.scope = Scope::global(),
          .source = "webhook",
          .consumer = "c.v1",
          .message_id = id,
          .event_type = "thing.happened",
          .schema_version = 1,
          .payload = {{"n", 1}}};
}

int port_of(const std::string& url) {
  std::smatch m;
  REQUIRE(std::regex_search(url, m, std::regex(R"(:(\d+)/)")));
  return std::stoi(m[1]);
}

// accept_many(batch) fails as a whole with an uncertain storage error.
void check_uncertain(Inbox& inbox, const std::vector<AcceptRequest>& batch) {
  try {
    inbox.accept_many(batch);
    FAIL("expected InboxStorageError");
  } catch (const InboxStorageError& e) {
    CHECK(e.uncertain());
    CHECK(e.code() == "STORAGE_UNCERTAIN");
  }
}

// After a batch of m-0 (retained before it), m-1 and m-2 that never landed, its
// redelivery finds m-0 and records the other two.
void check_redelivery_after_rollback(Inbox& inbox, const std::vector<AcceptRequest>& batch) {
  const auto redelivered = inbox.accept_many(batch);
  REQUIRE(redelivered.size() == 3);
  CHECK(redelivered[0].receipt().kind == Receipt::Kind::Duplicate);  // retained before the batch
  CHECK(redelivered[1].receipt().kind == Receipt::Kind::Accepted);
  CHECK(redelivered[2].receipt().kind == Receipt::Kind::Accepted);
}

// After a batch of m-0 (retained before it as receipt `earlier_id`), m-1 and m-2 that
// landed whole, its redelivery finds every item stored.
void check_redelivery_after_landing(Inbox& inbox, const std::vector<AcceptRequest>& batch, std::int64_t earlier_id) {
  const auto redelivered = inbox.accept_many(batch);
  REQUIRE(redelivered.size() == 3);
  for (const auto& result : redelivered) {
    REQUIRE(result.ok());
    CHECK(result.receipt().kind == Receipt::Kind::Duplicate);
  }
  CHECK(redelivered[0].receipt().id == earlier_id);
}

}  // namespace

TEST_CASE("a connection lost after the insert committed is uncertain and the redelivery is a duplicate") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 1});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  inbox.accept(request("warm-up"));  // statements are prepared; the next request is the insert itself

  proxy.drop_next_response();
  try {
    inbox.accept(request("m-1"));
    FAIL("expected InboxStorageError");
  } catch (const InboxStorageError& e) {
    CHECK(e.uncertain());
    CHECK(e.code() == "STORAGE_UNCERTAIN");
  }
  CHECK(proxy.faults() == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-1'") == 1);

  const Receipt redelivered = inbox.accept(request("m-1"));
  CHECK(redelivered.kind == Receipt::Kind::Duplicate);
}

TEST_CASE("a connection lost before the insert reached the server is uncertain and the redelivery is accepted") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 1});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  inbox.accept(request("warm-up"));

  proxy.drop_next_request();
  try {
    inbox.accept(request("m-1"));
    FAIL("expected InboxStorageError");
  } catch (const InboxStorageError& e) {
    CHECK(e.uncertain());
  }
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-1'") == 0);
  CHECK(inbox.accept(request("m-1")).kind == Receipt::Kind::Accepted);
}

TEST_CASE("a backend terminated while its insert waits is uncertain and reconciles on redelivery") {
  TestDatabase db;
  Inbox inbox(db.pool(2), {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  inbox.accept(request("warm-up"));

  // An uncommitted insert of the same identity makes accept() wait on it.
  auto blocker = db.connect();
  pqxx::work blocking(blocker);
  blocking.exec(
      db.qualified("INSERT INTO {schema}.inbox_receipts (scope_kind, source, consumer, message_id, event_type, "
                   "schema_version, payload, fingerprint) VALUES ('global', 'webhook', 'c.v1', 'm-1', "
                   "'thing.happened', 1, '{\"n\":1}', repeat('0', 64))"));

  std::atomic<bool> uncertain{false};
  std::atomic<bool> failed{false};
  std::thread acceptor([&] {
    try {
      inbox.accept(request("m-1"));
    } catch (const InboxStorageError& e) {
      failed = true;
      uncertain = e.uncertain();
    }
  });
  auto admin = db.connect();
  int terminated = 0;
  for (int i = 0; i < 100 && terminated == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    terminated = pqxx::nontransaction(admin)
                     .exec(
                         // This schema's insert only: other tests share the server.
                         "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO%" +
                         db.schema() + "%inbox_receipts%'")[0][0]
                     .as<int>();
  }
  acceptor.join();
  REQUIRE(terminated == 1);
  CHECK(failed);
  CHECK(uncertain);

  blocking.abort();
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-1'") == 0);
  const Receipt redelivered = inbox.accept(request("m-1"));
  CHECK(redelivered.kind == Receipt::Kind::Accepted);
}

TEST_CASE(
    "accept_many of several statements with a connection lost after its COMMIT landed is uncertain and the "
    "redelivery is duplicate") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 1});
  // A small statement budget cuts the batch into several statements: one transaction.
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .max_statement_bytes = 300, .notify = false});
  const Receipt earlier = inbox.accept(request("m-0"));  // already retained before the batch
  const std::vector<AcceptRequest> batch = {request("m-0"), request("m-1"), request("m-2")};

  proxy.drop_response_to("COMMIT");
  check_uncertain(inbox, batch);
  CHECK(proxy.faults() == 1);
  // The whole batch committed: each identity is retained exactly once.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);

  const auto redelivered = inbox.accept_many(batch);
  REQUIRE(redelivered.size() == 3);
  for (const auto& result : redelivered) {
    REQUIRE(result.ok());
    CHECK(result.receipt().kind == Receipt::Kind::Duplicate);
    CHECK(result.receipt().status == ReceiptStatus::Pending);
  }
  CHECK(redelivered[0].receipt().id == earlier.id);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
}

TEST_CASE(
    "accept_many of several statements with a connection lost before its COMMIT reached the server is uncertain and "
    "the redelivery is accepted") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 1});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .max_statement_bytes = 300, .notify = false});
  inbox.accept(request("m-0"));
  const std::vector<AcceptRequest> batch = {request("m-0"), request("m-1"), request("m-2")};

  proxy.drop_request_of("COMMIT");
  check_uncertain(inbox, batch);
  CHECK(proxy.faults() == 1);
  // The server saw the connection end inside the transaction: it rolled back.
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);

  check_redelivery_after_rollback(inbox, batch);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
}

TEST_CASE(
    "accept_many of one statement runs in autocommit: a lost reply to it is uncertain, it landed, and the "
    "redelivery is duplicate") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 1});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  const Receipt earlier = inbox.accept(request("m-0"));
  const std::vector<AcceptRequest> batch = {request("m-0"), request("m-1"), request("m-2")};

  proxy.drop_response_to_statement("boxcar.inbox.insert_many." + db.schema());
  check_uncertain(inbox, batch);
  CHECK(proxy.faults() == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);

  check_redelivery_after_landing(inbox, batch, earlier.id);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
}

TEST_CASE(
    "accept_many of one statement with its request lost on the way is uncertain, nothing landed, and the redelivery "
    "is accepted") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 1});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  inbox.accept(request("m-0"));
  const std::vector<AcceptRequest> batch = {request("m-0"), request("m-1"), request("m-2")};

  proxy.drop_request_of_statement("boxcar.inbox.insert_many." + db.schema());
  check_uncertain(inbox, batch);
  CHECK(proxy.faults() == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);

  check_redelivery_after_rollback(inbox, batch);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
}

TEST_CASE(
    "accept_many reads stored identities in a second statement, only when the insert skipped some: a batch of new "
    "identities never sends it, and a lost one after the insert committed is uncertain") {
  TestDatabase db;
  TcpProxy proxy("127.0.0.1", port_of(db.url()));
  auto pool = ConnectionPool::create({.url = proxy.route(db.url()), .size = 1});
  Inbox inbox(pool, {.schema = db.schema(), .consumers = {"c.v1"}, .notify = false});
  const Receipt earlier = inbox.accept(request("m-0"));

  // Armed for the next lookup: a batch of new identities runs the insert alone.
  proxy.drop_request_of_statement("boxcar.inbox.lookup_many." + db.schema());
  const std::vector<AcceptRequest> new_identities = {request("n-1"), request("n-2")};
  const auto fresh = inbox.accept_many(new_identities);
  REQUIRE(fresh.size() == 2);
  CHECK(fresh[0].receipt().kind == Receipt::Kind::Accepted);
  CHECK(fresh[1].receipt().kind == Receipt::Kind::Accepted);
  CHECK(proxy.faults() == 0);

  // m-0 is stored: the insert commits m-1 and m-2, then the lookup of m-0 is lost.
  const std::vector<AcceptRequest> batch = {request("m-0"), request("m-1"), request("m-2")};
  check_uncertain(inbox, batch);
  CHECK(proxy.faults() == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 5);

  check_redelivery_after_landing(inbox, batch, earlier.id);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 5);
}
