// Who sends the inbox's wake-ups: a statement that is due one (the first after a quiet
// spell) carries it in its own transaction (kInsertRide, kInsertManyRide), one per
// consumer; a statement that inserts nothing sends none; and a NOTIFY that fails (a full
// notification queue) never costs the batch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "boxcar/inbox/inbox.hpp"
#include "test_database.hpp"

using namespace boxcar;
using boxcar::testing::TestDatabase;

namespace {

AcceptRequest item(const std::string& consumer, const std::string& id) {
  return {.scope = Scope::global(),
          .source = "kafka:orders",
          .consumer = consumer,
          .message_id = id,
          .event_type = "order.created",
          .schema_version = 1,
          .payload = {{"id", id}}};
}

std::vector<AcceptRequest> batch_of(int size, const std::string& prefix) {
  std::vector<AcceptRequest> batch;
  for (int i = 0; i < size; ++i)
    batch.push_back(item(i % 2 == 0 ? "orders.v1" : "audit.v1", prefix + std::to_string(i)));
  return batch;
}

// The notifications on the inbox channel, with the backend that sent each.
struct Listener {
  struct Notification {
    std::string payload;
    int backend_pid;
  };
  struct Receiver final : pqxx::notification_receiver {
    using notification_receiver::notification_receiver;
    void operator()(const std::string& payload, int backend_pid) override {
      received.push_back({payload, backend_pid});
    }
    std::vector<Notification> received;
  };

  pqxx::connection connection;
  Receiver receiver;
  explicit Listener(const TestDatabase& db)
      : connection(db.url()), receiver(connection, Inbox::notify_channel(db.schema())) {
    connection.get_notifs();
  }
  // Waits until `count` notifications arrived (5 s at most), then 300 ms more for any extra.
  const std::vector<Notification>& await(std::size_t count) {
    for (int i = 0; i < 50 && receiver.received.size() < count; ++i) connection.await_notification(0, 100000);
    connection.await_notification(0, 300000);
    return receiver.received;
  }
};

int backend_pid(ConnectionPool& pool) {
  auto connection = pool.acquire();
  pqxx::nontransaction tx(*connection);
  return tx.exec1("SELECT pg_catalog.pg_backend_pid()")[0].as<int>();
}

InboxOptions options(const TestDatabase& db) { return {.schema = db.schema(), .consumers = {"orders.v1", "audit.v1"}}; }

// An Inbox whose every statement runs on one pooled connection, the backend
// `inserting_backend`, and a listener on its channel.
struct OneConnection {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = ConnectionPool::create({.url = db.url(), .size = 1});
  int inserting_backend = backend_pid(*pool);
  Inbox inbox{pool, options(db)};
  Listener listener{db};
};

void check_all_accepted(const std::vector<AcceptResult>& results) {
  for (const auto& result : results) {
    REQUIRE(result.ok());
    CHECK(result.receipt().kind == Receipt::Kind::Accepted);
  }
}

}  // namespace

TEST_CASE("a batch due a wake-up wakes each consumer once, from its own transaction") {
  OneConnection setup;
  check_all_accepted(setup.inbox.accept_many(batch_of(40, "m-")));

  const auto& received = setup.listener.await(2);
  REQUIRE(received.size() == 2);  // one per consumer, and nothing from the notifier's thread
  CHECK(received[0].backend_pid == setup.inserting_backend);
  CHECK(received[1].backend_pid == setup.inserting_backend);
  CHECK(((received[0].payload == "orders.v1" && received[1].payload == "audit.v1") ||
         (received[0].payload == "audit.v1" && received[1].payload == "orders.v1")));
  CHECK(setup.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 40);
}

TEST_CASE("a single accept() due a wake-up sends it from its own insert") {
  OneConnection setup;
  const Receipt receipt = setup.inbox.accept(item("orders.v1", "one"));
  CHECK(receipt.kind == Receipt::Kind::Accepted);

  const auto& received = setup.listener.await(1);
  REQUIRE(received.size() == 1);
  CHECK(received[0].payload == "orders.v1");
  CHECK(received[0].backend_pid == setup.inserting_backend);
}

TEST_CASE("a duplicate sends no wake-up: its statement notifies nothing, and leaves nothing to the notifier") {
  OneConnection setup;
  setup.inbox.accept(item("orders.v1", "one"));
  REQUIRE(setup.listener.await(1).size() == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // past the notifier's interval

  // Due a wake-up, but it inserts no row: its NOTIFY never runs, and there is nothing new
  // for a worker to claim.
  CHECK(setup.inbox.accept(item("orders.v1", "one")).kind == Receipt::Kind::Duplicate);
  CHECK(setup.inbox.accept_many(std::vector{item("orders.v1", "one")})[0].receipt().kind == Receipt::Kind::Duplicate);
  CHECK(setup.listener.await(2).size() == 1);
}

namespace {

// Makes every statement that notifies fail as pg_notify does on a full queue (54000); the
// sequence notify_attempts counts the attempts, since the failed statement's writes roll back.
void refuse_notify(TestDatabase& db) {
  db.execute("CREATE SEQUENCE {schema}.notify_attempts");
  db.execute(R"(
CREATE FUNCTION {schema}.refuse_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_catalog.current_query() LIKE '%pg_notify%' THEN
    PERFORM pg_catalog.nextval('{schema}.notify_attempts');
    RAISE EXCEPTION 'too many notifications in the NOTIFY queue' USING ERRCODE = '54000';
  END IF;
  RETURN NEW;
END $$)");
  db.execute(
      "CREATE TRIGGER refuse_notify BEFORE INSERT ON {schema}.inbox_receipts FOR EACH ROW EXECUTE FUNCTION "
      "{schema}.refuse_notify()");
}

}  // namespace

TEST_CASE("a batch whose NOTIFY fails with a full notification queue is recorded without it, and still wakes") {
  TestDatabase db;
  refuse_notify(db);
  Inbox inbox(db.pool(), options(db));
  Listener listener(db);

  check_all_accepted(inbox.accept_many(batch_of(40, "m-")));

  CHECK(db.scalar("SELECT last_value FROM {schema}.notify_attempts") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 40);
  // From the notifier's own connection: the wake-up the failed statement carried went
  // back to it (and may have gone out before the batch was recorded), and the batch's
  // consumers were marked after it was.
  const auto& received = listener.await(4);
  CHECK(received.size() >= 2);
  const auto sent = [&](const std::string& consumer) {
    return std::count_if(received.begin(), received.end(), [&](const auto& n) { return n.payload == consumer; });
  };
  CHECK(sent("orders.v1") >= 1);
  CHECK(sent("audit.v1") >= 1);
}

TEST_CASE(
    "a single accept() whose NOTIFY fails with a full notification queue is recorded without it, and still wakes") {
  TestDatabase db;
  refuse_notify(db);
  Inbox inbox(db.pool(), options(db));
  Listener listener(db);

  const Receipt receipt = inbox.accept(item("orders.v1", "one"));
  CHECK(receipt.kind == Receipt::Kind::Accepted);

  CHECK(db.scalar("SELECT last_value FROM {schema}.notify_attempts") == 1);
  CHECK(db.scalar("SELECT count(*) FROM {schema}.inbox_receipts") == 1);
  // The wake-up the failed statement carried went back to the notifier, which sends it
  // from its own connection.
  const auto& received = listener.await(1);
  REQUIRE_FALSE(received.empty());
  CHECK(received[0].payload == "orders.v1");
}
