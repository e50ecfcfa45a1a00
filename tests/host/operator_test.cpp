// The operator commands (status, dead list/groups/show/retry/discard, purge) against a
// real PostgreSQL: DEAD rows are made with accept()/emit() and SQL updates, and every
// test checks the outcome by counting rows (and the DEAD purge's plan, with EXPLAIN).
#include <catch2/catch.hpp>

#include <algorithm>

#include "boxcar/ops/detail/named_statements.hpp"
#include "boxcar/ops/operator.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "named_statement.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

const std::string kOrders = "orders.v1";
const std::string kAudit = "audit.v1";
const std::string kBilling = "billing.v1";

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool = db.pool(4);
  Inbox inbox{pool, {.schema = db.schema(), .consumers = {kOrders, kAudit, kBilling}, .notify = false}};
  OutboxEmitter outbox{pool, {.schema = db.schema(), .notify = false}};

  template <typename... Args>
  void exec(const std::string& sql, Args&&... args) {
    Tx tx = pool->begin();
    tx.exec(db.qualified(sql), std::forward<Args>(args)...);
    tx.commit();
  }
  std::int64_t count(const std::string& sql) const { return db.scalar(sql); }

  std::int64_t accept(const std::string& consumer, const std::string& id,
                      const std::string& event_type = "thing.happened") {
    return inbox.accept(message(consumer, id, event_type)).id;
  }
  // A receipt that died `age` ago with the given failure.
  void kill(std::int64_t id, const std::string& type, const std::string& error, std::chrono::seconds age = 0s) {
    exec(
        "UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'X', attempts = 3, "
        "finished_attempts = 3, last_error_type = $2, last_error = $3, "
        "updated_at = now() - make_interval(secs => $4) WHERE id = $1",
        id, type, error, static_cast<double>(age.count()));
  }
  std::int64_t dead(const std::string& consumer, const std::string& id, const std::string& type,
                    const std::string& error, std::chrono::seconds age = 0s,
                    const std::string& event_type = "thing.happened") {
    const auto receipt = accept(consumer, id, event_type);
    kill(receipt, type, error, age);
    return receipt;
  }
  void complete(std::int64_t id, std::chrono::hours ago) {
    exec(
        "UPDATE {schema}.inbox_receipts SET status = 'COMPLETED', attempts = 1, finished_attempts = 1, "
        "completed_at = now() - make_interval(hours => $2) WHERE id = $1",
        id, static_cast<int>(ago.count()));
  }

  std::int64_t emit(const std::string& event_type = "order.projected", const std::string& order = "o-1") {
    Tx tx = pool->begin();
    const auto event = outbox.emit(tx,
                                   OutboxMessage{.event_type = event_type,
                                                 .schema_version = 1,
                                                 .topic = "orders.projected",
                                                 .payload = {{"orderId", order}}},
                                   {.scope = Scope::tenant("t1"), .headers = {{"h", "v"}}});
    tx.commit();
    return event.id;
  }
  void kill_event(std::int64_t id, const std::string& error, std::chrono::seconds age = 0s) {
    exec(
        "UPDATE {schema}.outbox_events SET status = 'DEAD', dead_reason = 'ATTEMPTS_EXHAUSTED', attempts = 5, "
        "last_error = $2, updated_at = now() - make_interval(secs => $3) WHERE id = $1",
        id, error, static_cast<double>(age.count()));
  }
  void publish(std::int64_t id, std::chrono::hours ago) {
    exec(
        "UPDATE {schema}.outbox_events SET status = 'PUBLISHED', attempts = 1, "
        "published_at = now() - make_interval(hours => $2) WHERE id = $1",
        id, static_cast<int>(ago.count()));
  }
};

std::vector<std::int64_t> ids_of(const std::vector<DeadRecord>& records) {
  std::vector<std::int64_t> ids;
  for (const auto& r : records) ids.push_back(r.id);
  std::sort(ids.begin(), ids.end());
  return ids;
}

template <typename Call>
std::string error_code(Call&& call) {
  try {
    call();
  } catch (const OperatorError& e) {
    return e.code();
  }
  return "";
}

}  // namespace

TEST_CASE("status counts receipts and events per status and shows declared consumers without rows as zeros") {
  Setup s;
  s.accept(kOrders, "p-1");
  s.exec("UPDATE {schema}.inbox_receipts SET available_at = now() - interval '90 seconds' WHERE message_id = 'p-1'");
  s.accept(kOrders, "p-2");
  s.complete(s.accept(kOrders, "c-1"), 1h);
  s.dead(kOrders, "d-1", "Boom", "exploded");
  const auto discarded = s.dead(kOrders, "d-2", "Boom", "exploded");
  s.exec("UPDATE {schema}.inbox_receipts SET discarded_at = now(), discarded_by = 'bob' WHERE id = $1", discarded);
  // Retrying later: RETRYABLE but not due, so it does not count towards the due age.
  s.accept(kAudit, "r-1");
  s.exec(
      "UPDATE {schema}.inbox_receipts SET status = 'RETRYABLE', attempts = 1, finished_attempts = 1, "
      "available_at = now() + interval '1 hour' WHERE message_id = 'r-1'");
  s.emit();
  s.publish(s.emit(), 1h);
  s.kill_event(s.emit(), "broker down");
  s.exec("UPDATE {schema}.outbox_events SET created_at = now() - interval '2 minutes' WHERE status = 'PENDING'");

  const auto report = status(*s.pool, s.db.schema(), {kOrders, kAudit, kBilling});

  REQUIRE(report.inbox.size() == 3);
  const auto& audit = report.inbox[0];
  const auto& billing = report.inbox[1];
  const auto& orders = report.inbox[2];
  CHECK(audit.consumer == kAudit);
  CHECK(audit.retryable == 1);
  CHECK(audit.oldest_due_age == 0ms);
  CHECK(billing.consumer == kBilling);
  CHECK(billing.declared);
  CHECK(billing.pending + billing.processing + billing.retryable + billing.completed + billing.dead +
            billing.discarded ==
        0);
  CHECK(orders.consumer == kOrders);
  CHECK(orders.pending == s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE consumer = 'orders.v1' "
                                  "AND status = 'PENDING'"));
  CHECK(orders.pending == 2);
  CHECK(orders.completed == 1);
  CHECK(orders.dead == 1);
  CHECK(orders.discarded == 1);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 2);
  CHECK(orders.oldest_due_age >= 90s);
  CHECK(orders.oldest_due_age < 600s);

  CHECK(report.outbox.pending == 1);
  CHECK(report.outbox.published == 1);
  CHECK(report.outbox.dead == 1);
  CHECK(report.outbox.discarded == 0);
  CHECK(report.outbox.oldest_unpublished_age >= 120s);
  CHECK(s.count("SELECT count(*) FROM {schema}.outbox_events") == 3);

  const auto json = to_json(report);
  CHECK(json["schema"] == s.db.schema());
  CHECK(json["inbox"]["consumers"].size() == 3);
  CHECK(json["inbox"]["consumers"][1]["consumer"] == kBilling);
  CHECK(json["inbox"]["consumers"][1]["pending"] == 0);
  CHECK(json["inbox"]["consumers"][2]["dead"] == 1);
  CHECK(json["inbox"]["totals"]["pending"] == 2);
  CHECK(json["inbox"]["totals"]["retryable"] == 1);
  CHECK(json["outbox"]["dead"] == 1);
  CHECK(json["outbox"]["oldest_unpublished_age_seconds"].get<double>() >= 120.0);

  const auto table = to_table(report);
  CHECK(table.find("CONSUMER") != std::string::npos);
  CHECK(table.find(kBilling) != std::string::npos);
  CHECK(table.find("OLDEST UNPUBLISHED") != std::string::npos);

  // A consumer with rows that nobody declared still shows.
  const auto undeclared = status(*s.pool, s.db.schema());
  REQUIRE(undeclared.inbox.size() == 2);
  CHECK_FALSE(undeclared.inbox[0].declared);
}

TEST_CASE("dead list returns only DEAD records that are not discarded and honours every filter") {
  Setup s;
  const auto a = s.dead(kOrders, "a", "TimeoutError", "upstream timed out after 30s", 2h);
  const auto b = s.dead(kOrders, "b", "ValidationError", "field total is negative", 10min, "order.created");
  const auto c = s.dead(kAudit, "c", "TimeoutError", "db TIMEOUT", 0s);
  const auto gone = s.dead(kOrders, "d", "TimeoutError", "upstream timed out after 30s", 3h);
  s.exec("UPDATE {schema}.inbox_receipts SET discarded_at = now(), discarded_by = 'bob' WHERE id = $1", gone);
  s.accept(kOrders, "alive");
  REQUIRE(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 5);
  const auto& schema = s.db.schema();

  const auto all = dead_list(*s.pool, schema, RecordKind::Inbox);
  REQUIRE(all.size() == 3);
  CHECK(all[0].id == a);  // oldest first
  CHECK(all[0].consumer == kOrders);
  CHECK(all[0].message_id == "a");
  CHECK(all[0].source == "test");
  CHECK(all[0].scope_kind == "tenant");
  CHECK(all[0].scope_id == "t1");
  CHECK(all[0].attempts == 3);
  CHECK(all[0].dead_reason == "X");
  CHECK(all[0].last_error_type == "TimeoutError");
  CHECK(all[0].last_error == "upstream timed out after 30s");
  CHECK(all[0].replay_count == 0);
  CHECK(all[0].failure == "TimeoutError: upstream timed out after <n>s");
  CHECK(all[0].group.size() == 12);
  CHECK(all[0].payload.is_null());

  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.consumer = kOrders})) ==
        std::vector<std::int64_t>{a, b});
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.event_type = "order.created"})) ==
        std::vector<std::int64_t>{b});
  // Case-insensitive, on the message or the type.
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.error_contains = "timeout"})) ==
        std::vector<std::int64_t>{a, c});
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.error_contains = "validationerror"})) ==
        std::vector<std::int64_t>{b});
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.older_than = 5min})) == std::vector<std::int64_t>{a, b});
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.older_than = 1h})) == std::vector<std::int64_t>{a});
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.ids = {c, gone, 999999}})) ==
        std::vector<std::int64_t>{c});
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.consumer = kOrders, .error_contains = "TIMED"})) ==
        std::vector<std::int64_t>{a});
  CHECK(ids_of(dead_list(*s.pool, schema, RecordKind::Inbox, {.group = all[0].group})) == std::vector<std::int64_t>{a});
  CHECK(dead_list(*s.pool, schema, RecordKind::Inbox, {.limit = 2}).size() == 2);

  const auto event = s.emit();
  s.kill_event(event, "Broker: Message size too large (1048577 bytes)");
  s.emit();
  const auto events = dead_list(*s.pool, schema, RecordKind::Outbox);
  REQUIRE(events.size() == 1);
  CHECK(events[0].id == event);
  CHECK(events[0].kind == RecordKind::Outbox);
  CHECK(events[0].event_id.size() == 36);
  CHECK(events[0].topic == "orders.projected");
  CHECK(events[0].failure == "ATTEMPTS_EXHAUSTED: Broker: Message size too large (<n> bytes)");
  CHECK(dead_list(*s.pool, schema, RecordKind::Outbox, {.error_contains = "SIZE"}).size() == 1);
  CHECK(dead_list(*s.pool, schema, RecordKind::Outbox, {.event_type = "other"}).empty());

  const auto json = to_json(all);
  CHECK(json.size() == 3);
  CHECK(json[0]["message_id"] == "a");
  CHECK_FALSE(json[0].contains("payload"));
  CHECK(to_table(all).find("TimeoutError: upstream timed out after <n>s") != std::string::npos);
}

TEST_CASE("functions planted on the caller's search_path do not change which DEAD records are selected") {
  Setup s;
  const auto a = s.dead(kOrders, "a", "TimeoutError", "upstream timed out after 30s");
  const auto b = s.dead(kOrders, "b", "TimeoutError", "upstream timed out after 45s");
  // A schema first on the operator's search_path (as public is for many roles), with an
  // exact-type cardinality(bigint[]) that would beat the polymorphic
  // pg_catalog.cardinality(anyarray), and a failure_fingerprint that would merge every
  // failure into one group.
  const std::string planted = s.db.schema() + "_planted";
  s.exec("CREATE SCHEMA " + planted);
  s.exec("CREATE FUNCTION " + planted + ".cardinality(bigint[]) RETURNS integer LANGUAGE sql AS 'SELECT 1'");
  s.exec("CREATE FUNCTION " + planted +
         ".failure_fingerprint(text, text) RETURNS text LANGUAGE sql AS $$SELECT 'planted'$$");
  const auto separator = s.db.url().find('?') == std::string::npos ? "?" : "&";
  auto hijacked = ConnectionPool::create(
      {.url = s.db.url() + separator + "options=-csearch_path%3D" + planted + "%2Cpublic", .size = 1});

  const auto records = dead_list(*hijacked, s.db.schema(), RecordKind::Inbox);
  CHECK(ids_of(records) == std::vector<std::int64_t>{a, b});
  REQUIRE(records.size() == 2);
  CHECK(records[0].failure == "TimeoutError: upstream timed out after <n>s");
  const auto groups = dead_groups(*hijacked, s.db.schema(), RecordKind::Inbox);
  REQUIRE(groups.size() == 1);
  CHECK(groups[0].count == 2);
  CHECK(dead_retry(*hijacked, s.db.schema(), RecordKind::Inbox, {.all = true}, "alice").ids ==
        std::vector<std::int64_t>{a, b});
  hijacked.reset();
  s.exec("DROP SCHEMA " + planted + " CASCADE");
}

TEST_CASE("dead groups put failures that differ only in numbers, uuids and hex ids into one group") {
  Setup s;
  s.dead(kOrders, "1", "NotFound", "order 1001 not found", 3h);
  s.dead(kOrders, "2", "NotFound", "order 20022 not found", 2h);
  s.dead(kAudit, "3", "NotFound", "order 7 not found", 1h, "order.created");
  s.dead(kOrders, "4", "Conflict", "customer 550e8400-e29b-41d4-a716-446655440000 locked by tx 0x1f3a");
  s.dead(kOrders, "5", "Conflict", "customer 6BA7B810-9DAD-11D1-80B4-00C04FD430C8 locked by tx 0xbeef");
  s.dead(kOrders, "6", "Conflict", "request 9f86d081884c7d65 rejected");
  REQUIRE(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'") == 6);

  const auto groups = dead_groups(*s.pool, s.db.schema(), RecordKind::Inbox);
  REQUIRE(groups.size() == 3);
  CHECK(groups[0].failure == "NotFound: order <n> not found");
  CHECK(groups[0].count == 3);
  CHECK(groups[0].consumers == std::vector<std::string>{kAudit, kOrders});
  CHECK(groups[0].event_types == std::vector<std::string>{"order.created", "thing.happened"});
  CHECK(groups[0].first_seen < groups[0].last_seen);
  CHECK(groups[1].failure == "Conflict: customer <uuid> locked by tx <hex>");
  CHECK(groups[1].count == 2);
  CHECK(groups[2].failure == "Conflict: request <hex> rejected");
  CHECK(groups[2].count == 1);
  // The key is stable: it selects the same records again.
  CHECK(dead_list(*s.pool, s.db.schema(), RecordKind::Inbox, {.group = groups[0].group}).size() == 3);
  CHECK(dead_groups(*s.pool, s.db.schema(), RecordKind::Inbox, {.consumer = kAudit}).size() == 1);

  const auto json = to_json(groups);
  CHECK(json[0]["count"] == 3);
  CHECK(json[0]["group"] == groups[0].group);
  CHECK(to_table(groups).find("NotFound: order <n> not found") != std::string::npos);
}

TEST_CASE("dead show returns the payload and metadata of a DEAD record and refuses any other row") {
  Setup s;
  auto request = message(kOrders, "m-1");
  request.metadata.correlation_id = "corr-7";
  const auto id = s.inbox.accept(request).id;
  s.kill(id, "Boom", "exploded");
  const auto alive = s.accept(kOrders, "m-2");

  const auto record = dead_show(*s.pool, s.db.schema(), RecordKind::Inbox, id);
  CHECK(record.id == id);
  CHECK(record.payload == nlohmann::json{{"id", "m-1"}});
  CHECK(record.metadata.dump().find("corr-7") != std::string::npos);
  CHECK(record.content_fingerprint ==
        s.db.query("SELECT fingerprint FROM {schema}.inbox_receipts WHERE id = " + std::to_string(id))[0][0]
            .as<std::string>());
  CHECK(to_json(record)["payload"]["id"] == "m-1");
  CHECK(to_table(record).find("corr-7") != std::string::npos);

  CHECK(error_code([&] { dead_show(*s.pool, s.db.schema(), RecordKind::Inbox, alive); }) == "DEAD_RECORD_NOT_FOUND");
  CHECK(error_code([&] { dead_show(*s.pool, s.db.schema(), RecordKind::Inbox, 424242); }) == "DEAD_RECORD_NOT_FOUND");
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 2);

  const auto event = s.emit("order.projected", "o-9");
  s.kill_event(event, "broker down");
  const auto shown = dead_show(*s.pool, s.db.schema(), RecordKind::Outbox, event);
  CHECK(shown.payload == nlohmann::json{{"orderId", "o-9"}});
  CHECK(shown.metadata["headers"]["h"] == "v");
  CHECK(error_code([&] { dead_show(*s.pool, s.db.schema(), RecordKind::Outbox, id + 1000); }) ==
        "DEAD_RECORD_NOT_FOUND");
}

TEST_CASE("dead retry makes matching receipts PENDING with no attempts and records who replayed them") {
  Setup s;
  const auto target = s.dead(kOrders, "m-1", "NotFound", "order 17 not found");
  const auto other = s.dead(kAudit, "m-2", "NotFound", "order 18 not found");
  const auto before = s.db.query(
      "SELECT fingerprint, source, consumer, message_id, scope_id "
      "FROM {schema}.inbox_receipts WHERE id = " +
      std::to_string(target))[0];
  const auto fingerprint = before[0].as<std::string>();

  const auto result = dead_retry(*s.pool, s.db.schema(), RecordKind::Inbox, {.consumer = kOrders}, "alice", false);
  CHECK(result.action == "retry");
  CHECK_FALSE(result.dry_run);
  CHECK(result.ids == std::vector<std::int64_t>{target});
  CHECK_FALSE(result.limit_reached);

  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE id = " + std::to_string(target) +
                " AND status = 'PENDING' AND attempts = 0 AND finished_attempts = 0 AND dead_reason IS NULL"
                " AND available_at <= now() AND last_error_type = 'NotFound'"
                " AND last_error = 'order 17 not found' AND replay_count = 1"
                " AND last_replayed_by = 'alice' AND last_replayed_at IS NOT NULL"
                " AND fingerprint = '" +
                fingerprint +
                "' AND source = 'test' AND consumer = 'orders.v1'"
                " AND message_id = 'm-1' AND scope_id = 't1'") == 1);
  // The other consumer's record is untouched.
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE id = " + std::to_string(other) +
                " AND status = 'DEAD' AND replay_count = 0") == 1);
  // The same identity still deduplicates: it is the same receipt, now PENDING again.
  const auto redelivery = s.inbox.accept(message(kOrders, "m-1"));
  CHECK(redelivery.kind == Receipt::Kind::Duplicate);
  CHECK(redelivery.id == target);
  CHECK(redelivery.status == ReceiptStatus::Pending);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 2);

  // Dying and being replayed again counts the replays.
  s.kill(target, "NotFound", "order 17 not found");
  dead_retry(*s.pool, s.db.schema(), RecordKind::Inbox, {.ids = {target}}, "bob", false);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE id = " + std::to_string(target) +
                " AND replay_count = 2 AND last_replayed_by = 'bob'") == 1);
}

TEST_CASE("dead retry of outbox events makes them publishable again") {
  Setup s;
  const auto event = s.emit();
  s.kill_event(event, "broker down");
  const auto event_id =
      s.db.query("SELECT event_id::text FROM {schema}.outbox_events WHERE id = " + std::to_string(event))[0][0]
          .as<std::string>();

  const auto result =
      dead_retry(*s.pool, s.db.schema(), RecordKind::Outbox, {.error_contains = "BROKER"}, "alice", false);
  CHECK(result.ids == std::vector<std::int64_t>{event});
  CHECK(s.count("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PENDING' AND attempts = 0"
                " AND dead_reason IS NULL AND last_error = 'broker down' AND replay_count = 1"
                " AND last_replayed_by = 'alice' AND event_id = '" +
                event_id + "'") == 1);
  CHECK(s.count("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'DEAD'") == 0);
}

TEST_CASE("dead retry changes at most limit records per call and says when more may match") {
  Setup s;
  for (int i = 0; i < 5; ++i) s.dead(kOrders, "m-" + std::to_string(i), "Boom", "exploded");
  const auto first = dead_retry(*s.pool, s.db.schema(), RecordKind::Inbox, {.consumer = kOrders, .limit = 3}, "ops");
  CHECK(first.ids.size() == 3);
  CHECK(first.limit_reached);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING'") == 3);
  const auto second = dead_retry(*s.pool, s.db.schema(), RecordKind::Inbox, {.consumer = kOrders, .limit = 3}, "ops");
  CHECK(second.ids.size() == 2);
  CHECK_FALSE(second.limit_reached);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING'") == 5);
}

TEST_CASE("a dry run reports the records it would change and changes nothing") {
  Setup s;
  const auto a = s.dead(kOrders, "a", "Boom", "exploded");
  const auto b = s.dead(kOrders, "b", "Boom", "exploded again");
  s.dead(kAudit, "c", "Boom", "exploded");
  const auto event = s.emit();
  s.kill_event(event, "broker down");

  const auto retry = dead_retry(*s.pool, s.db.schema(), RecordKind::Inbox, {.consumer = kOrders}, "alice", true);
  CHECK(retry.dry_run);
  CHECK(retry.ids == std::vector<std::int64_t>{a, b});
  const auto discard = dead_discard(*s.pool, s.db.schema(), RecordKind::Inbox, {.consumer = kOrders}, "alice", true);
  CHECK(discard.ids == std::vector<std::int64_t>{a, b});
  const auto outbox = dead_retry(*s.pool, s.db.schema(), RecordKind::Outbox, {.all = true}, "alice", true);
  CHECK(outbox.ids == std::vector<std::int64_t>{event});

  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD' AND replay_count = 0"
                " AND discarded_at IS NULL AND last_replayed_by IS NULL") == 3);
  CHECK(s.count("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'DEAD' AND replay_count = 0") == 1);
  CHECK(to_json(retry)["count"] == 2);
}

TEST_CASE("discard keeps the DEAD row so a redelivery of its identity is still a duplicate") {
  Setup s;
  const auto id = s.dead(kOrders, "m-1", "Boom", "exploded");
  s.dead(kOrders, "m-2", "Other", "something else");

  const auto result = dead_discard(*s.pool, s.db.schema(), RecordKind::Inbox, {.ids = {id}}, "carol", false);
  CHECK(result.action == "discard");
  CHECK(result.ids == std::vector<std::int64_t>{id});
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE id = " + std::to_string(id) +
                " AND status = 'DEAD' AND dead_reason = 'X' AND discarded_by = 'carol'"
                " AND discarded_at IS NOT NULL") == 1);

  const auto redelivery = s.inbox.accept(message(kOrders, "m-1"));
  CHECK(redelivery.kind == Receipt::Kind::Duplicate);
  CHECK(redelivery.id == id);
  CHECK(redelivery.status == ReceiptStatus::Dead);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 2);

  // Discarded records leave the dead views and can no longer be retried or discarded.
  CHECK(dead_list(*s.pool, s.db.schema(), RecordKind::Inbox).size() == 1);
  CHECK(dead_retry(*s.pool, s.db.schema(), RecordKind::Inbox, {.ids = {id}}, "carol").ids.empty());
  CHECK(dead_discard(*s.pool, s.db.schema(), RecordKind::Inbox, {.ids = {id}}, "dave").ids.empty());
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE discarded_by = 'carol'") == 1);
  CHECK(status(*s.pool, s.db.schema()).inbox[0].discarded == 1);
  // dead show still explains what happened to it.
  const auto shown = dead_show(*s.pool, s.db.schema(), RecordKind::Inbox, id);
  REQUIRE(shown.discarded_at.has_value());
  CHECK(shown.discarded_by == "carol");
}

TEST_CASE("retry and discard without a filter are refused unless all is set") {
  Setup s;
  s.dead(kOrders, "a", "Boom", "exploded");
  s.dead(kAudit, "b", "Boom", "exploded");
  const auto& schema = s.db.schema();

  CHECK(error_code([&] { dead_retry(*s.pool, schema, RecordKind::Inbox, {}, "alice"); }) == "DEAD_FILTER_REQUIRED");
  CHECK(error_code([&] { dead_discard(*s.pool, schema, RecordKind::Inbox, {}, "alice"); }) == "DEAD_FILTER_REQUIRED");
  CHECK(error_code([&] { dead_retry(*s.pool, schema, RecordKind::Outbox, {.limit = 5}, "alice"); }) ==
        "DEAD_FILTER_REQUIRED");
  CHECK(error_code([&] { dead_retry(*s.pool, schema, RecordKind::Inbox, {.consumer = kOrders}, ""); }) ==
        "DEAD_ACTOR_REQUIRED");
  CHECK(error_code([&] { dead_retry(*s.pool, schema, RecordKind::Outbox, {.consumer = kOrders}, "alice"); }) ==
        "DEAD_FILTER_INVALID");
  CHECK(error_code([&] { dead_list(*s.pool, schema, RecordKind::Inbox, {.limit = 0}); }) == "DEAD_FILTER_INVALID");
  CHECK(error_code([&] { parse_record_kind("inbx"); }) == "RECORD_KIND_INVALID");
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD' AND replay_count = 0") == 2);

  const auto everything = dead_retry(*s.pool, schema, RecordKind::Inbox, {.all = true}, "alice");
  CHECK(everything.ids.size() == 2);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'PENDING' AND replay_count = 1") == 2);
}

TEST_CASE(
    "purge deletes only old COMPLETED receipts, in bounded batches, and keeps an outbox partition younger than its retention") {
  Setup s;
  for (int i = 0; i < 10; ++i) s.complete(s.accept(kOrders, "old-" + std::to_string(i)), 24h * 40);
  s.complete(s.accept(kOrders, "recent"), 24h);
  s.dead(kOrders, "dead", "Boom", "exploded", 24h * 60);
  s.accept(kOrders, "pending");
  s.exec(
      "UPDATE {schema}.inbox_receipts SET created_at = now() - interval '60 days', "
      "available_at = now() - interval '60 days' WHERE message_id = 'pending'");
  for (int i = 0; i < 10; ++i) s.publish(s.emit(), 24h * 8);
  s.publish(s.emit(), 24h);
  s.kill_event(s.emit(), "broker down", 24h * 60);
  s.emit();
  const PurgeOptions options{.batch_size = 3};

  const auto planned = purge(*s.pool, s.db.schema(), {.batch_size = 3, .dry_run = true});
  CHECK(planned.dry_run);
  CHECK(planned.inbox_deleted == 10);
  // The outbox retires whole partitions (docs/schema.md, "Outbox partitions"): these events
  // are in today's, which is not past retention however old their published_at.
  CHECK(planned.outbox_deleted == 0);
  CHECK(planned.outbox_partitions_retired == 0);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 13);
  CHECK(s.count("SELECT count(*) FROM {schema}.outbox_events") == 13);

  const auto report = purge(*s.pool, s.db.schema(), options);
  CHECK_FALSE(report.dry_run);
  CHECK(report.inbox_deleted == 10);
  CHECK(report.inbox_batches == 4);  // 3 + 3 + 3 + 1
  CHECK(report.outbox_deleted == 0);
  CHECK(report.outbox_partitions_retired == 0);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id IN ('recent', 'dead', 'pending')") == 3);
  CHECK(s.count("SELECT count(*) FROM {schema}.outbox_events") == 13);
  CHECK(to_json(report)["inbox_deleted"] == 10);

  // Nothing left past retention: one short batch each.
  const auto again = purge(*s.pool, s.db.schema(), options);
  CHECK(again.inbox_deleted == 0);
  CHECK(again.inbox_batches == 1);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 3);

  CHECK(error_code([&] { purge(*s.pool, s.db.schema(), {.batch_size = 0}); }) == "PURGE_INVALID");
  CHECK(error_code([&] { purge(*s.pool, s.db.schema(), {.inbox_retention = -1h}); }) == "PURGE_INVALID");
}

TEST_CASE(
    "with a DEAD retention, purge deletes the DEAD receipts unchanged past it, discarded or not, consumer by "
    "consumer in bounded batches, and never without one") {
  Setup s;
  for (int i = 0; i < 5; ++i) s.dead(kOrders, "old-" + std::to_string(i), "Boom", "exploded", 24h * 10);
  for (int i = 0; i < 2; ++i) s.dead(kAudit, "old-" + std::to_string(i), "Boom", "exploded", 24h * 10);
  s.dead(kBilling, "discarded", "Boom", "exploded", 24h * 10);
  s.exec(
      "UPDATE {schema}.inbox_receipts SET discarded_at = now() - interval '10 days', discarded_by = 'alice' "
      "WHERE message_id = 'discarded'");
  s.dead(kOrders, "young", "Boom", "exploded", 24h * 2);
  s.complete(s.accept(kOrders, "completed"), 24h);
  s.accept(kOrders, "pending");
  s.exec("UPDATE {schema}.inbox_receipts SET updated_at = now() - interval '60 days' WHERE message_id = 'pending'");
  const auto dead = [&] { return s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE status = 'DEAD'"); };

  // Off by default: DEAD receipts stay until an operator retries them.
  CHECK(purge(*s.pool, s.db.schema(), {.batch_size = 2}).inbox_dead_deleted == 0);
  CHECK(dead() == 9);

  const PurgeOptions options{.dead_retention = 24h * 7, .batch_size = 2};
  auto dry = options;
  dry.dry_run = true;
  CHECK(purge(*s.pool, s.db.schema(), dry).inbox_dead_deleted == 8);
  CHECK(dead() == 9);

  const auto report = purge(*s.pool, s.db.schema(), options);
  CHECK(report.inbox_dead_deleted == 8);
  CHECK(report.inbox_deleted == 0);
  // COMPLETED: one short batch; DEAD of orders.v1 2 + 2 + 1, audit.v1 2 + 0, billing.v1 1.
  CHECK(report.inbox_batches == 1 + 3 + 2 + 1);
  CHECK(to_json(report)["inbox_dead_deleted"] == 8);
  CHECK(dead() == 1);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id IN ('young', 'completed', 'pending')") ==
        3);
  // The identity went with its receipt: a redelivery is accepted as new and handled again.
  CHECK(s.inbox.accept(message(kOrders, "old-0")).kind == Receipt::Kind::Accepted);

  CHECK(error_code([&] { purge(*s.pool, s.db.schema(), {.dead_retention = -1h}); }) == "PURGE_INVALID");
}

TEST_CASE("the DEAD retention keeps a DEAD head that blocks its ordering key, and its waiting receipts wait") {
  Setup s;
  Inbox ordered{s.pool,
                {.schema = s.db.schema(),
                 .consumers = {kOrders},
                 .ordering = {{kOrders, {.key = OrderingKey::payload_pointer("/key")}}},
                 .notify = false}};
  const auto keyed = [&](const std::string& id, const std::string& key) {
    auto request = message(kOrders, id);
    request.payload = {{"key", key}};
    return ordered.accept(request).id;
  };
  const auto head = keyed("head", "k-1");
  keyed("behind", "k-1");
  s.kill(head, "Boom", "exploded", 24h * 10);
  // A DEAD receipt of a key it no longer blocks (released by `dead unblock` long ago).
  const auto released = keyed("released", "k-2");
  s.kill(released, "Boom", "exploded", 24h * 10);
  s.exec(
      "UPDATE {schema}.inbox_receipts SET key_released_at = now() - interval '10 days', "
      "updated_at = now() - interval '10 days' WHERE id = $1",
      released);
  REQUIRE(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'behind' AND status = 'WAITING'") ==
          1);

  const auto report = purge(*s.pool, s.db.schema(), {.dead_retention = 24h * 7});
  CHECK(report.inbox_dead_deleted == 1);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'released'") == 0);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'head' AND status = 'DEAD'") == 1);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'behind' AND status = 'WAITING'") ==
        1);
}

TEST_CASE("the DEAD purge reads each consumer's DEAD receipts through inbox_receipts_dead, a range of its index") {
  Setup s;
  // Many finished receipts beside a few DEAD ones, as in a live inbox.
  s.exec(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint, status, attempts, finished_attempts, completed_at) "
      "SELECT 'tenant', 't1', 'test', $1, 'c-' || i, 'thing.happened', 1, '{}', repeat('a', 64), 'COMPLETED', 1, 1, "
      "now() FROM generate_series(1, 20000) AS i",
      kOrders);
  for (int i = 0; i < 20; ++i) s.dead(kOrders, "d-" + std::to_string(i), "Boom", "exploded", 24h * 10);
  s.exec("ANALYZE {schema}.inbox_receipts");
  auto conn = s.db.connect();
  pqxx::work tx(conn);
  // The first execution's custom plan, and the generic plan a cached statement may switch to.
  for (const char* mode : {"auto", "force_generic_plan"}) {
    tx.exec(std::string("SET LOCAL plan_cache_mode = ") + mode);
    const auto plan =
        explain_prepared(tx, s.db.qualified(statement_sql(detail::ops_statements(), "retention.purge_dead")),
                         "'" + kOrders + "', 604800, 1000, '-infinity'");
    INFO(mode << ":\n" << plan);
    CHECK_THAT(plan, Catch::Contains("Index Scan using inbox_receipts_dead on inbox_receipts"));
    CHECK_THAT(plan, Catch::Contains("Index Cond: ((consumer = ") && Catch::Contains("AND (updated_at < "));
    CHECK_THAT(plan, !Catch::Contains("Seq Scan"));
  }
}

TEST_CASE("purge through a pool runs on the pool's session URL, never on database.url (a transaction pooler)") {
  Setup s;
  s.complete(s.accept(kOrders, "old"), 24h * 40);
  // database.url reaches nothing: every statement purge ran through it would fail.
  auto pool =
      ConnectionPool::create({.url = "postgresql://boxcar@127.0.0.1:1/nowhere", .session_url = s.db.url(), .size = 1});
  const auto report = purge(*pool, s.db.schema());
  CHECK(report.inbox_deleted == 1);
  CHECK(report.outbox_skipped.empty());
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 0);
  CHECK(pool->open_connections() == 0);
}

TEST_CASE("a redelivery after its receipt was purged is accepted as new") {
  Setup s;
  const auto first = s.inbox.accept(message(kOrders, "m-1"));
  REQUIRE(first.kind == Receipt::Kind::Accepted);
  s.complete(first.id, 24h * 31);
  CHECK(s.inbox.accept(message(kOrders, "m-1")).kind == Receipt::Kind::Duplicate);

  CHECK(purge(*s.pool, s.db.schema()).inbox_deleted == 1);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts") == 0);

  const auto again = s.inbox.accept(message(kOrders, "m-1"));
  CHECK(again.kind == Receipt::Kind::Accepted);
  CHECK(again.id != first.id);
  CHECK(s.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'm-1' AND status = 'PENDING'") == 1);
}
