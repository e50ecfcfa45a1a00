// Per-key order of outbox events (migrations/0013_outbox_key_order.sql, docs/publisher.md
// "Ordering"): the triggers keep one event per (topic, key) claimable, in the commit order
// of the emitting transactions, through the publisher's own unchanged statements
// (publisher/src/publisher_queries.hpp, run here as the publisher runs them), failures,
// lease expiry, DEAD, an operator's requeue, deletes, and concurrent emitters.
#include <catch2/catch.hpp>

#include <algorithm>
#include <future>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/core/detail/with_schema.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/pg_array.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/core/uuid.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/detail/named_statements.hpp"
#include "boxcar/testing/eventually.hpp"
#include "named_statement.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

std::string publisher_statement(const std::string& name) { return statement_sql(detail::publisher_statements(), name); }

struct Claimed {
  std::int64_t id;
  std::string event_id;
  std::string key;
  int n;
};

// The publisher's statements on their own connection, with the publisher's parameters.
class PublisherStatements {
 public:
  explicit PublisherStatements(const TestDatabase& db)
      : connection_(db.url()),
        claim_(detail::with_schema(publisher_statement("publisher.claim"), db.schema())),
        published_(detail::with_schema(publisher_statement("publisher.mark_published"), db.schema())),
        failed_(detail::with_schema(publisher_statement("publisher.mark_failed"), db.schema())),
        recover_(detail::with_schema(publisher_statement("publisher.recover_expired"), db.schema())) {}

  // Claims up to 100 due events under `token` (a 30 s lease, no byte limit).
  std::vector<Claimed> claim(const std::string& token) {
    std::vector<Claimed> claimed;
    for (const auto& row :
         pqxx::nontransaction(connection_).exec_params(claim_, 100LL, token, 30000LL, 1LL << 40, true))
      claimed.push_back({row["id"].as<std::int64_t>(), row["event_id"].as<std::string>(),
                         row["message_key"].as<std::string>(),
                         nlohmann::json::parse(row["payload"].as<std::string>()).at("n").get<int>()});
    return claimed;
  }
  void mark_published(const std::vector<Claimed>& events, const std::string& token) {
    if (events.empty()) return;
    const auto ids = event_ids(events);
    pqxx::nontransaction(connection_)
        .exec_params(published_, pg_array(ids), token, *std::min_element(ids.begin(), ids.end()),
                     *std::max_element(ids.begin(), ids.end()));
  }
  // A failed delivery: RETRYABLE after `backoff_ms` (at most), or DEAD when `permanent`.
  void mark_failed(const std::vector<Claimed>& events, const std::string& token, long long backoff_ms,
                   bool permanent = false) {
    if (events.empty()) return;
    const auto ids = event_ids(events);
    pqxx::nontransaction(connection_)
        .exec_params(failed_, pg_array(ids), token, std::string("broker said no"), backoff_ms, backoff_ms, 0, permanent,
                     0LL, *std::min_element(ids.begin(), ids.end()), *std::max_element(ids.begin(), ids.end()));
  }
  void recover_expired() { pqxx::nontransaction(connection_).exec_params(recover_, 100LL, 0, 0LL); }

 private:
  static std::vector<std::string> event_ids(const std::vector<Claimed>& events) {
    std::vector<std::string> out;
    for (const auto& e : events) out.push_back(e.event_id);
    return out;
  }

  pqxx::connection connection_;
  std::string claim_, published_, failed_, recover_;
};

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = db.pool(6);
  OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = false}};

  EmittedEvent emit(TxView tx, const std::string& key, int n, bool ordered = true, const std::string& tenant = "t1") {
    return outbox.emit(
        tx,
        OutboxMessage{.event_type = "thing.happened", .schema_version = 1, .topic = "things", .payload = {{"n", n}}},
        {.scope = Scope::tenant(tenant), .key = key, .ordered = ordered});
  }
  // One committed transaction per event.
  EmittedEvent emit_committed(const std::string& key, int n, bool ordered = true, const std::string& tenant = "t1") {
    Tx tx = pool->begin();
    const auto emitted = emit(tx, key, n, ordered, tenant);
    tx.commit();
    return emitted;
  }
  std::string status_of(std::int64_t id) const {
    return db.query("SELECT status FROM {schema}.outbox_events WHERE id = " + std::to_string(id))[0][0].c_str();
  }
  std::int64_t count(const std::string& where) const {
    return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE " + where);
  }
  std::int64_t key_rows() const { return db.scalar("SELECT count(*) FROM {schema}.outbox_ordering_keys"); }
  // Whether the backend `pid` is waiting for a lock (not merely running a slow statement).
  bool waits_for_a_lock(std::int64_t pid) const {
    return db.scalar("SELECT count(*) FROM pg_stat_activity WHERE pid = " + std::to_string(pid) +
                     " AND wait_event_type = 'Lock'") == 1;
  }
};

// Emits (key, n) in a transaction of its own on another thread and commits it; `pid` gets
// its backend's pid before the emit. Returns the event's row id.
std::future<std::int64_t> emit_elsewhere(Setup& s, std::shared_ptr<ConnectionPool> pool, const std::string& key, int n,
                                         std::promise<std::int64_t>& pid) {
  return std::async(std::launch::async, [&s, &pid, pool, key, n] {
    Tx tx = pool->begin();
    pid.set_value(tx.exec("SELECT pg_catalog.pg_backend_pid()")[0][0].as<std::int64_t>());
    const auto emitted = s.emit(tx, key, n);
    tx.commit();
    return emitted.id;
  });
}

}  // namespace

TEST_CASE("the events of one key are claimed one at a time, in the order their transactions committed") {
  Setup s;
  for (int n = 0; n < 4; ++n) {
    s.emit_committed("a", n);
    s.emit_committed("b", 100 + n);
  }
  CHECK(s.count("status = 'PENDING'") == 2);
  CHECK(s.count("status = 'WAITING'") == 6);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE message_key = 'a' AND key_seq = "
                    "(payload::jsonb ->> 'n')::bigint + 1") == 4);
  CHECK(s.key_rows() == 2);

  PublisherStatements publisher(s.db);
  std::map<std::string, std::vector<int>> published;
  for (int round = 0; round < 4; ++round) {
    const std::string token = uuid_v7();
    const auto claimed = publisher.claim(token);
    INFO("round " << round);
    REQUIRE(claimed.size() == 2);  // one per key, whatever the batch size
    CHECK(claimed[0].key != claimed[1].key);
    // A second publisher finds nothing: the next events of both keys are WAITING.
    CHECK(publisher.claim(uuid_v7()).empty());
    publisher.mark_published(claimed, token);
    for (const auto& e : claimed) published[e.key].push_back(e.n);
  }
  CHECK(published["a"] == std::vector<int>{0, 1, 2, 3});
  CHECK(published["b"] == std::vector<int>{100, 101, 102, 103});
  CHECK(publisher.claim(uuid_v7()).empty());
  CHECK(s.count("status = 'PUBLISHED'") == 8);
  // The last event of each key finished: its row is gone.
  CHECK(s.key_rows() == 0);
}

TEST_CASE("a failed head stays RETRYABLE through its backoff and its key's later events stay WAITING") {
  Setup s;
  for (int n = 0; n < 3; ++n) s.emit_committed("a", n);
  PublisherStatements publisher(s.db);

  std::string token = uuid_v7();
  auto claimed = publisher.claim(token);
  REQUIRE(claimed.size() == 1);
  publisher.mark_failed(claimed, token, 60000);
  // Before this change, the next event of the key was published while the head waited out
  // its backoff: the reorder of the issue.
  CHECK(s.status_of(claimed[0].id) == "RETRYABLE");
  CHECK(s.count("status = 'WAITING'") == 2);
  CHECK(publisher.claim(uuid_v7()).empty());

  // Due again: the same head is claimed, then the next one once it is published.
  s.db.execute("UPDATE {schema}.outbox_events SET available_at = now() WHERE status = 'RETRYABLE'");
  token = uuid_v7();
  claimed = publisher.claim(token);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].n == 0);
  publisher.mark_published(claimed, token);
  token = uuid_v7();
  claimed = publisher.claim(token);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].n == 1);
}

TEST_CASE("an expired claim keeps its key and is claimed again before the key's next event") {
  Setup s;
  for (int n = 0; n < 2; ++n) s.emit_committed("a", n);
  PublisherStatements publisher(s.db);
  const auto claimed = publisher.claim(uuid_v7());
  REQUIRE(claimed.size() == 1);
  s.db.execute(
      "UPDATE {schema}.outbox_events SET lease_expires_at = now() - interval '1 second' "
      "WHERE status = 'PUBLISHING'");
  publisher.recover_expired();
  CHECK(s.status_of(claimed[0].id) == "RETRYABLE");
  CHECK(s.count("status = 'WAITING'") == 1);
  const auto again = publisher.claim(uuid_v7());
  REQUIRE(again.size() == 1);
  CHECK(again[0].id == claimed[0].id);
}

TEST_CASE("a DEAD head releases its key: the next event becomes PENDING and the DEAD one is a gap") {
  Setup s;
  for (int n = 0; n < 3; ++n) s.emit_committed("a", n);
  PublisherStatements publisher(s.db);
  std::string token = uuid_v7();
  auto claimed = publisher.claim(token);
  REQUIRE(claimed.size() == 1);
  publisher.mark_failed(claimed, token, 0, true);  // permanent: DEAD at once
  CHECK(s.status_of(claimed[0].id) == "DEAD");
  CHECK(s.count("status = 'PENDING'") == 1);
  CHECK(s.count("status = 'WAITING'") == 1);
  CHECK(s.db.scalar("SELECT unfinished FROM {schema}.outbox_ordering_keys") == 2);

  token = uuid_v7();
  claimed = publisher.claim(token);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].n == 1);
}

TEST_CASE("an operator's requeue of a DEAD event puts it behind its key's unfinished events") {
  Setup s;
  for (int n = 0; n < 3; ++n) s.emit_committed("a", n);
  PublisherStatements publisher(s.db);
  std::string token = uuid_v7();
  const auto dead = publisher.claim(token);
  REQUIRE(dead.size() == 1);
  publisher.mark_failed(dead, token, 0, true);

  // As `boxcar dead retry` does (ops/src/operator_queries.hpp, kOutboxRetry).
  const auto requeue = [&] {
    s.db.execute(
        "UPDATE {schema}.outbox_events SET status = 'PENDING', attempts = 0, available_at = now(), "
        "dead_reason = NULL, replay_count = replay_count + 1 WHERE id = " +
        std::to_string(dead[0].id));
  };
  requeue();
  CHECK(s.status_of(dead[0].id) == "WAITING");
  CHECK(s.db.scalar("SELECT key_seq FROM {schema}.outbox_events WHERE id = " + std::to_string(dead[0].id)) == 4);

  std::vector<int> order;
  for (;;) {
    token = uuid_v7();
    const auto claimed = publisher.claim(token);
    if (claimed.empty()) break;
    REQUIRE(claimed.size() == 1);
    order.push_back(claimed[0].n);
    publisher.mark_published(claimed, token);
  }
  CHECK(order == std::vector<int>{1, 2, 0});
  CHECK(s.key_rows() == 0);

  // Requeued when nothing else of its key is unfinished: it is the head at once.
  s.db.execute("UPDATE {schema}.outbox_events SET status = 'DEAD', dead_reason = 'X', published_at = NULL WHERE id = " +
               std::to_string(dead[0].id));
  requeue();
  CHECK(s.status_of(dead[0].id) == "PENDING");
  CHECK(s.key_rows() == 1);
}

TEST_CASE("deleting an unfinished head releases its key, and TRUNCATE empties every key") {
  Setup s;
  for (int n = 0; n < 3; ++n) s.emit_committed("a", n);
  s.db.execute("DELETE FROM {schema}.outbox_events WHERE status = 'PENDING'");
  CHECK(s.count("status = 'PENDING'") == 1);
  CHECK(s.count("status = 'WAITING'") == 1);
  CHECK(s.db.scalar("SELECT unfinished FROM {schema}.outbox_ordering_keys") == 2);
  // A WAITING event deleted: counted out, and the head stays the head.
  s.db.execute("DELETE FROM {schema}.outbox_events WHERE status = 'WAITING'");
  CHECK(s.count("status = 'PENDING'") == 1);
  CHECK(s.db.scalar("SELECT unfinished FROM {schema}.outbox_ordering_keys") == 1);

  s.emit_committed("a", 3);
  s.db.execute("TRUNCATE {schema}.outbox_events");
  CHECK(s.key_rows() == 0);
  s.emit_committed("a", 4);
  CHECK(s.count("status = 'PENDING'") == 1);
}

TEST_CASE("events emitted with ordered = false are never WAITING and never hold a key") {
  Setup s;
  for (int n = 0; n < 3; ++n) s.emit_committed("a", n, false);
  s.emit_committed("a", 3);  // an ordered one behind unordered ones of the same key
  {
    // A global event without a key has its own event id as key: nothing to order.
    Tx tx = s.pool->begin();
    s.outbox.emit(
        tx,
        OutboxMessage{.event_type = "thing.happened", .schema_version = 1, .topic = "things", .payload = {{"n", 9}}},
        {.scope = Scope::global()});
    tx.commit();
  }
  CHECK(s.count("status = 'PENDING'") == 5);
  CHECK(s.count("key_seq IS NULL") == 4);
  CHECK(s.count("NOT ordered") == 4);
  CHECK(s.key_rows() == 1);
  PublisherStatements publisher(s.db);
  CHECK(publisher.claim(uuid_v7()).size() == 5);
}

TEST_CASE("a second transaction emitting the same key waits for the first to commit and comes after it") {
  Setup s;
  Tx first = s.pool->begin();
  s.emit(first, "a", 1);

  std::promise<std::int64_t> second_pid;
  auto second = emit_elsewhere(s, s.pool, "a", 2, second_pid);
  const auto pid = second_pid.get_future().get();
  // Blocked on the key row's lock held by `first`.
  CHECK(eventually([&] { return s.waits_for_a_lock(pid); }, 10s));
  CHECK(second.wait_for(0s) == std::future_status::timeout);
  first.commit();
  const auto second_id = second.get();

  CHECK(s.db.scalar("SELECT key_seq FROM {schema}.outbox_events WHERE (payload::jsonb ->> 'n') = '1'") == 1);
  CHECK(s.db.scalar("SELECT key_seq FROM {schema}.outbox_events WHERE id = " + std::to_string(second_id)) == 2);
  CHECK(s.status_of(second_id) == "WAITING");
}

TEST_CASE("an emitter that rolls back leaves no trace in its key and lets the waiting emitter be the head") {
  Setup s;
  auto first = std::make_unique<Tx>(s.pool->begin());
  s.emit(*first, "a", 1);
  std::promise<std::int64_t> second_pid;
  auto second = emit_elsewhere(s, s.pool, "a", 2, second_pid);
  const auto pid = second_pid.get_future().get();
  CHECK(eventually([&] { return s.waits_for_a_lock(pid); }, 10s));
  first.reset();  // rolled back
  const auto second_id = second.get();
  CHECK(s.status_of(second_id) == "PENDING");
  CHECK(s.db.scalar("SELECT key_seq FROM {schema}.outbox_events WHERE id = " + std::to_string(second_id)) == 1);
  CHECK(s.db.scalar("SELECT unfinished FROM {schema}.outbox_ordering_keys") == 1);
  CHECK(s.count("true") == 1);
}

TEST_CASE("two emitters taking two keys in opposite orders deadlock and the aborted one rolls back whole") {
  Setup s;
  Tx first = s.pool->begin();
  s.emit(first, "a", 1);
  std::promise<void> second_holds_b;
  auto second = std::async(std::launch::async, [&]() -> bool {
    Tx tx = s.pool->begin();
    s.emit(tx, "b", 2);
    second_holds_b.set_value();
    try {
      s.emit(tx, "a", 3);  // waits for `first`, which then waits for this one
      tx.commit();
      return true;
    } catch (const std::exception&) {
      return false;  // rolled back by the Tx's destructor
    }
  });
  second_holds_b.get_future().wait();
  bool first_committed = true;
  try {
    s.emit(first, "b", 4);
    first.commit();
  } catch (const std::exception&) {
    first_committed = false;
  }
  const bool second_committed = second.get();
  // PostgreSQL's deadlock detector aborts exactly one of them.
  REQUIRE(first_committed != second_committed);

  // The survivor's two events are there; none of the victim's; the key rows count them.
  CHECK(s.count("true") == 2);
  CHECK(s.count(first_committed ? "(payload::jsonb ->> 'n') IN ('1', '4')"
                                : "(payload::jsonb ->> 'n') IN ('2', '3')") == 2);
  CHECK(s.db.scalar("SELECT sum(unfinished) FROM {schema}.outbox_ordering_keys") == 2);
  CHECK(s.count("status = 'PENDING'") == 2);
}

// A UUIDv7 of now, as every Boxcar emitter makes them (the outbox is partitioned by them
// since 0019), in SQL an emitter of 0011 could run.
const std::string kUuidV7Now =
    "(SELECT (substr(h, 1, 8) || '-' || substr(h, 9, 4) || substr(gen_random_uuid()::text, 14))::uuid FROM (SELECT "
    "lpad(to_hex(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') AS h) AS ms)";

TEST_CASE("events from before migration 0013 and those of an older emitter after it are not ordered") {
  const std::string url = database_url();
  const std::string schema = "bx_keyorder_" + std::to_string(std::random_device{}() % 1000000);
  struct Drop {
    std::string url, schema;
    ~Drop() {
      try {
        pqxx::connection c(url);
        pqxx::nontransaction(c).exec("DROP SCHEMA IF EXISTS " + quote_identifier(schema) + " CASCADE");
      } catch (...) {
      }
    }
  } drop{url, schema};
  const std::string table = quote_identifier(schema) + ".outbox_events";
  // The insert of an emitter that knows only 0011 (no `ordered` column).
  const std::string old_insert =
      "INSERT INTO " + table +
      " (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id, payload) "
      "VALUES (" +
      kUuidV7Now + ", 'thing.happened', 1, 'things', 'a', 'tenant', 't1', '{}')";
  const auto scalar = [&](const std::string& sql) {
    pqxx::connection c(url);
    return pqxx::nontransaction(c).exec1(sql)[0].as<long long>();
  };
  migrate(url, {.schema = schema, .target_version = 11});
  {
    pqxx::connection c(url);
    pqxx::nontransaction(c).exec(old_insert);
    pqxx::nontransaction(c).exec(old_insert);
  }
  migrate(url, {.schema = schema});
  CHECK(scalar("SELECT count(*) FROM " + table + " WHERE status = 'PENDING' AND key_seq IS NULL") == 2);
  {
    pqxx::connection c(url);
    pqxx::nontransaction(c).exec(old_insert);
    pqxx::nontransaction(c).exec(old_insert);
  }
  // An older emitter knows nothing of ordering: its events stay unordered, before and after.
  CHECK(scalar("SELECT count(*) FROM " + table + " WHERE status = 'PENDING' AND NOT ordered") == 4);
  CHECK(scalar("SELECT count(*) FROM " + quote_identifier(schema) + ".outbox_ordering_keys") == 0);
}

// Keys are scoped (migration 0037): two tenants emitting the same key on one topic have
// two keys.
TEST_CASE("two tenants' events of one topic and key neither wait for each other nor for a failing head") {
  Setup s;
  const auto a0 = s.emit_committed("42", 0, true, "A");
  s.emit_committed("42", 1, true, "A");
  const auto b0 = s.emit_committed("42", 100, true, "B");
  CHECK(s.status_of(a0.id) == "PENDING");
  CHECK(s.status_of(b0.id) == "PENDING");  // not WAITING behind tenant A's event
  CHECK(s.key_rows() == 2);

  // Tenant A's head fails for a minute: only A's next event waits.
  PublisherStatements publisher(s.db);
  std::string token = uuid_v7();
  auto claimed = publisher.claim(token);
  REQUIRE(claimed.size() == 2);
  std::vector<Claimed> of_a, of_b;
  for (const auto& e : claimed) (e.n < 100 ? of_a : of_b).push_back(e);
  REQUIRE(of_a.size() == 1);
  REQUIRE(of_b.size() == 1);
  publisher.mark_failed(of_a, token, 60000);
  publisher.mark_published(of_b, token);
  const auto b1 = s.emit_committed("42", 101, true, "B");
  CHECK(s.status_of(b1.id) == "PENDING");
  token = uuid_v7();
  claimed = publisher.claim(token);
  REQUIRE(claimed.size() == 1);
  CHECK(claimed[0].n == 101);
  CHECK(s.count("status = 'WAITING'") == 1);  // A's second event, behind A's RETRYABLE head

  // An open transaction of tenant A holding key 42 does not hold tenant B's emit.
  Tx a_open = s.pool->begin();
  s.emit(a_open, "42", 2, true, "A");
  std::promise<std::int64_t> pid;
  auto b_emit = std::async(std::launch::async, [&] {
    Tx tx = s.pool->begin();
    pid.set_value(tx.exec("SELECT pg_catalog.pg_backend_pid()")[0][0].as<std::int64_t>());
    const auto emitted = s.emit(tx, "42", 102, true, "B");
    tx.commit();
    return emitted.id;
  });
  pid.get_future().get();
  REQUIRE(b_emit.wait_for(10s) == std::future_status::ready);
  b_emit.get();
  a_open.rollback();
}
