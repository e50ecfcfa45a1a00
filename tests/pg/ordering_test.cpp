// Per-key ordering (docs/ordering.md): an ordered consumer's receipts of one key run one
// at a time, in accept order, whatever the concurrency; a failing head holds only its own
// key, strictly under `block` (until an operator unblocks it) or for N attempts under
// `park_after(N)`.
#include <catch2/catch.hpp>

#include <atomic>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "boxcar/inbox/worker.hpp"
#include "boxcar/ops/backlog_collector.hpp"
#include "boxcar/ops/ordering_keys.hpp"
#include "boxcar/ops/status.hpp"
#include "exposition.hpp"
#include "worker_fixture.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

constexpr const char* kConsumer = "orders.v1";

// Message `seq` of key `key`: the key travels in the payload, the pointer the rule names.
// Its message id names its tenant unless that is the default one, "t1".
AcceptRequest keyed(const std::string& key, int seq, const std::string& tenant = "t1") {
  return {.scope = Scope::tenant(tenant),
          .source = "test",
          .consumer = kConsumer,
          .message_id = (tenant == "t1" ? "" : tenant + ":") + key + "-" + std::to_string(seq),
          .event_type = "thing.happened",
          .schema_version = 1,
          .payload = {{"order", {{"id", key}}}, {"seq", seq}}};
}

struct Setup {
  TestDatabase db;
  std::shared_ptr<ConnectionPool> pool;
  Setup() : pool(db.pool(12)) {
    db.query("CREATE TABLE {schema}.app_rows (row_id bigserial PRIMARY KEY, key text NOT NULL, seq int NOT NULL)");
  }

  InboxOptions inbox_options(HeadOfLine policy = HeadOfLine::block()) const {
    return {.schema = db.schema(),
            .consumers = {kConsumer},
            .ordering = {{kConsumer, {.key = OrderingKey::payload_pointer("/order/id"), .head_of_line = policy}}}};
  }
  WorkerOptions worker_options(std::size_t concurrency, std::size_t batch_size = 1) const {
    return {.schema = db.schema(),
            .consumers = {kConsumer},
            .concurrency = concurrency,
            .batch_size = batch_size,
            .claim_limit = 16,
            .lease = 10s,
            .handler_timeout = 5s,
            .max_attempts = 5,
            .backoff = {.base = 5ms, .cap = 20ms},
            .poll_interval = 50ms};
  }
  std::string status_of(const std::string& message_id) const {
    const auto rows = db.query("SELECT status FROM {schema}.inbox_receipts WHERE message_id = '" + message_id + "'");
    return rows.empty() ? "" : rows[0][0].as<std::string>();
  }
  long long count(const std::string& where) const {
    return db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE " + where);
  }
  // Claims one receipt the way the claim statements do; returns its id and claim token.
  std::pair<std::string, std::string> claim(const std::string& message_id) const {
    const auto rows = db.query(
        "UPDATE {schema}.inbox_receipts SET status = 'PROCESSING', claim_token = gen_random_uuid(), "
        "lease_expires_at = now() + interval '1 minute', attempts = attempts + 1 WHERE message_id = '" +
        message_id + "' RETURNING id::text, claim_token::text");
    REQUIRE(rows.size() == 1);
    return {rows[0][0].as<std::string>(), rows[0][1].as<std::string>()};
  }
  std::string head_of(const std::string& key) const {
    const auto rows = db.query(
        "SELECT r.message_id FROM {schema}.inbox_ordering_keys AS k "
        "JOIN {schema}.inbox_receipts AS r ON r.id = k.head_id WHERE k.ordering_key = '" +
        key + "'");
    return rows.empty() ? "" : rows[0][0].as<std::string>();
  }
  // Each key's sequence numbers in the order their application rows were written.
  std::map<std::string, std::vector<int>> written() const {
    std::map<std::string, std::vector<int>> out;
    for (const auto& row : db.query("SELECT key, seq FROM {schema}.app_rows ORDER BY row_id"))
      out[row[0].as<std::string>()].push_back(row[1].as<int>());
    return out;
  }
};

// Writes one app row per message; counts how many messages of each key run at once.
class OrderProbe final : public InboxHandler {
 public:
  explicit OrderProbe(std::string table, std::string poisoned = "") : table_(std::move(table)), poisoned_(poisoned) {}
  void handle(const nlohmann::json& payload, HandlerContext& context) override {
    const auto key = payload.at("order").at("id").get<std::string>();
    const int now_running = ++running_[slot(key)];
    if (now_running > 1) overlaps_.fetch_add(1);
    struct Leave {
      std::atomic<int>& n;
      ~Leave() { --n; }
    } leave{running_[slot(key)]};
    std::this_thread::sleep_for(1ms);  // widen the window an overlap would need
    if (key == poisoned_) throw std::runtime_error("poisoned key");
    context.tx.exec("INSERT INTO " + table_ + " (key, seq) VALUES ($1, $2)", key, payload.at("seq").get<int>());
  }
  int overlaps() const { return overlaps_.load(); }

 private:
  static std::size_t slot(const std::string& key) { return std::hash<std::string>{}(key) % 1024; }
  std::string table_;
  std::string poisoned_;
  std::array<std::atomic<int>, 1024> running_{};
  std::atomic<int> overlaps_{0};
};

HandlerRegistration probe_registration(const std::shared_ptr<OrderProbe>& probe) {
  return {.consumer = kConsumer, .supports = {{"thing.happened", 1}}, .handler = probe};
}

}  // namespace

TEST_CASE("receipts of one key wait behind the oldest unfinished one and unordered consumers never wait") {
  Setup s;
  Inbox inbox(s.pool, s.inbox_options());
  for (int seq = 0; seq < 3; ++seq) inbox.accept(keyed("a", seq));
  inbox.accept(keyed("b", 0));
  CHECK(s.status_of("a-0") == "PENDING");
  CHECK(s.status_of("a-1") == "WAITING");
  CHECK(s.status_of("a-2") == "WAITING");
  CHECK(s.status_of("b-0") == "PENDING");
  // A redelivery is a duplicate and changes nothing of the key.
  CHECK(inbox.accept(keyed("a", 1)).kind == Receipt::Kind::Duplicate);
  CHECK(s.count("status = 'WAITING'") == 2);

  Inbox unordered(s.pool, {.schema = s.db.schema(), .consumers = {"plain.v1"}});
  for (int i = 0; i < 3; ++i) unordered.accept(message("plain.v1", "p-" + std::to_string(i)));
  CHECK(s.count("consumer = 'plain.v1' AND status = 'PENDING' AND ordering_key IS NULL") == 3);
}

TEST_CASE("accept_many keeps the input order within a key, and a message without its key is refused naming the field") {
  Setup s;
  Inbox inbox(s.pool, s.inbox_options());
  // Input order 2, 0, 1 for key "a": the batch's own order is the key's order.
  const std::vector<AcceptRequest> batch = {keyed("a", 2), keyed("b", 0), keyed("a", 0), keyed("a", 1)};
  for (const auto& r : inbox.accept_many(batch)) REQUIRE(r.ok());
  CHECK(s.status_of("a-2") == "PENDING");
  CHECK(s.status_of("a-0") == "WAITING");
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts AS x, {schema}.inbox_receipts AS y "
                    "WHERE x.message_id = 'a-0' AND y.message_id = 'a-1' AND x.key_seq < y.key_seq") == 1);

  AcceptRequest keyless = keyed("a", 9);
  keyless.payload = {{"seq", 9}};
  try {
    inbox.accept(keyless);
    FAIL("a message without its ordering key was accepted");
  } catch (const InboxValidationError& e) {
    CHECK(e.code() == "INBOX_ORDERING_KEY_MISSING");
    CHECK(e.field() == "payload/order/id");
  }
  AcceptRequest object_key = keyed("a", 9);
  object_key.payload = {{"order", {{"id", {{"nested", true}}}}}};
  CHECK_THROWS_MATCHES(inbox.accept(object_key), InboxValidationError,
                       Catch::Predicate<InboxValidationError>(
                           [](const auto& e) { return e.code() == std::string("INBOX_ORDERING_KEY_INVALID"); }));
  CHECK_THROWS_AS(Inbox(s.pool, {.schema = s.db.schema(),
                                 .consumers = {kConsumer},
                                 .ordering = {{"other.v1", {.key = OrderingKey::metadata_header("k")}}}}),
                  ConfigError);
  CHECK_THROWS_AS(HeadOfLine::park_after(0), ConfigError);
}

TEST_CASE("concurrent workers run each key's receipts one at a time in accept order") {
  Setup s;
  constexpr int kKeys = 20, kPerKey = 25;
  {
    Inbox inbox(s.pool, s.inbox_options());
    // Interleaved arrival, rounds of single accepts alternating with rounds of batches
    // (each round's last batch is sent before the next round begins: that is the order).
    std::vector<AcceptRequest> batch;
    const auto flush = [&] {
      for (const auto& r : inbox.accept_many(batch)) REQUIRE(r.ok());
      batch.clear();
    };
    for (int seq = 0; seq < kPerKey; ++seq) {
      for (int k = 0; k < kKeys; ++k) {
        if (seq % 2 == 0) {
          inbox.accept(keyed("k" + std::to_string(k), seq));
        } else {
          batch.push_back(keyed("k" + std::to_string(k), seq));
          if (batch.size() == 7) flush();
        }
      }
      if (!batch.empty()) flush();
    }
  }
  // Two worker instances (as two processes would), one in batched mode.
  auto probe = std::make_shared<OrderProbe>(s.db.qualified("{schema}.app_rows"));
  Worker one(s.pool, s.worker_options(6), {probe_registration(probe)});
  Worker two(s.pool, s.worker_options(4, 8), {probe_registration(probe)});
  one.start();
  two.start();
  REQUIRE(eventually([&] { return s.count("status = 'COMPLETED'") == kKeys * kPerKey; }, 60s));
  one.stop();
  two.stop();

  CHECK(probe->overlaps() == 0);
  const auto written = s.written();
  REQUIRE(written.size() == static_cast<std::size_t>(kKeys));
  for (const auto& [key, seqs] : written) {
    INFO("key " << key);
    std::vector<int> expected(kPerKey);
    for (int i = 0; i < kPerKey; ++i) expected[i] = i;
    CHECK(seqs == expected);
  }
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_ordering_keys") == 0);
}

TEST_CASE("under block a poisoned key stays blocked behind its DEAD head until unblocked, and only that key") {
  Setup s;
  {
    Inbox inbox(s.pool, s.inbox_options(HeadOfLine::block()));
    for (int seq = 0; seq < 3; ++seq)
      for (const char* key : {"good1", "bad", "good2"}) inbox.accept(keyed(key, seq));
  }
  auto probe = std::make_shared<OrderProbe>(s.db.qualified("{schema}.app_rows"), "bad");
  Worker worker(s.pool, s.worker_options(4), {probe_registration(probe)});
  worker.start();
  REQUIRE(eventually([&] { return s.count("status = 'COMPLETED'") == 6 && s.status_of("bad-0") == "DEAD"; }, 30s));
  std::this_thread::sleep_for(300ms);  // several poll intervals: nothing else of "bad" may run
  CHECK(s.status_of("bad-1") == "WAITING");
  CHECK(s.status_of("bad-2") == "WAITING");
  CHECK(s.db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'bad-0'") == 5);

  const auto blocked = blocked_keys(*s.pool, s.db.schema());
  REQUIRE(blocked.size() == 1);
  CHECK(blocked[0].key == "bad");
  CHECK(blocked[0].head_status == "DEAD");
  CHECK(blocked[0].waiting == 2);
  const auto report = status(*s.pool, s.db.schema(), {kConsumer});
  REQUIRE(report.blocked_keys.size() == 1);
  CHECK(report.inbox.at(0).waiting == 2);
  // The gauges: one blocked key, two receipts waiting behind it.
  auto metrics = std::make_shared<Metrics>();
  BacklogCollector collector(s.pool, metrics, {.schema = s.db.schema(), .declared_consumers = {kConsumer}});
  collector.collect_once();
  const Exposition e(metrics->serialize());
  CHECK(e.value("boxcar_inbox_blocked_keys", {{"consumer", kConsumer}}) == 1);
  CHECK(e.value("boxcar_inbox_oldest_blocked_age_seconds", {{"consumer", kConsumer}}).value_or(-1) >= 0);
  CHECK(e.value("boxcar_inbox_receipts", {{"consumer", kConsumer}, {"status", "WAITING"}}) == 2);

  // Releasing the key lets the rest run; the poison stays DEAD and replayable.
  CHECK(unblock_key(*s.pool, s.db.schema(), {.key = "good1", .actor = "test"})
            .empty());  // not blocked: nothing to release
  CHECK_THROWS_AS(unblock_key(*s.pool, s.db.schema(), {.key = "bad", .consumer = kConsumer}), OperatorError);
  // A dry run names what it would release and releases nothing.
  const auto planned =
      unblock_key(*s.pool, s.db.schema(), {.key = "bad", .consumer = kConsumer, .actor = "alice", .dry_run = true});
  REQUIRE(planned.size() == 1);
  CHECK(blocked_keys(*s.pool, s.db.schema()).size() == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE key_released_at IS NOT NULL") == 0);
  const auto released = unblock_key(*s.pool, s.db.schema(), {.key = "bad", .consumer = kConsumer, .actor = "alice"});
  REQUIRE(released.size() == 1);
  CHECK(released[0].consumer == kConsumer);
  CHECK(released[0].receipt_id == planned[0].receipt_id);
  // Who released it is recorded beside when.
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'bad-0' "
                    "AND key_released_by = 'alice' AND key_released_at IS NOT NULL") == 1);
  // bad-1 is poisoned too: it runs, goes DEAD and blocks the key in its turn.
  REQUIRE(eventually([&] { return s.status_of("bad-1") == "DEAD"; }, 30s));
  std::this_thread::sleep_for(300ms);
  worker.stop();
  CHECK(s.status_of("bad-0") == "DEAD");
  CHECK(s.status_of("bad-2") == "WAITING");
  const auto after = blocked_keys(*s.pool, s.db.schema());
  REQUIRE(after.size() == 1);
  CHECK(after[0].head_id == s.db.scalar("SELECT id FROM {schema}.inbox_receipts WHERE message_id = 'bad-1'"));
  CHECK(after[0].waiting == 1);
}

TEST_CASE("under park_after(2) a poisoned head goes DEAD after two attempts and its key moves on") {
  Setup s;
  {
    Inbox inbox(s.pool, s.inbox_options(HeadOfLine::park_after(2)));
    for (int seq = 0; seq < 3; ++seq)
      for (const char* key : {"good", "bad"}) inbox.accept(keyed(key, seq));
  }
  // Only the first message of "bad" is poisoned: the handler fails it by message id.
  struct FirstPoisoned final : InboxHandler {
    std::string table;
    void handle(const nlohmann::json& payload, HandlerContext& context) override {
      if (context.message_id == "bad-0") throw std::runtime_error("poison");
      context.tx.exec("INSERT INTO " + table + " (key, seq) VALUES ($1, $2)",
                      payload.at("order").at("id").get<std::string>(), payload.at("seq").get<int>());
    }
  };
  auto handler = std::make_shared<FirstPoisoned>();
  handler->table = s.db.qualified("{schema}.app_rows");
  Worker worker(s.pool, s.worker_options(4),
                {{.consumer = kConsumer, .supports = {{"thing.happened", 1}}, .handler = handler}});
  worker.start();
  REQUIRE(eventually([&] { return s.count("status = 'COMPLETED'") == 5; }, 30s));
  worker.stop();
  CHECK(s.status_of("bad-0") == "DEAD");
  CHECK(s.db.scalar("SELECT attempts FROM {schema}.inbox_receipts WHERE message_id = 'bad-0'") == 2);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_receipts "
                    "WHERE message_id = 'bad-0' AND dead_reason = 'PARKED_AFTER_ATTEMPTS'") == 1);
  CHECK(s.written().at("bad") == std::vector<int>{1, 2});
  CHECK(blocked_keys(*s.pool, s.db.schema()).empty());
}

// The batched worker's settlement (migrations/0021): the keys of a batch's receipts move
// on in one call before the batch completes, where the row trigger would run per receipt.
TEST_CASE("a batch's settlement moves each key it heads on, and only in the transaction that locked the batch") {
  Setup s;
  {
    Inbox inbox(s.pool, s.inbox_options());
    for (const auto& [key, n] : std::vector<std::pair<std::string, int>>{{"a", 3}, {"b", 1}, {"c", 2}})
      for (int seq = 0; seq < n; ++seq) inbox.accept(keyed(key, seq));
  }
  const auto [a0, a0_token] = s.claim("a-0");
  const auto [b0, b0_token] = s.claim("b-0");
  const auto [c0, c0_token] = s.claim("c-0");
  s.db.query("UPDATE {schema}.inbox_ordering_keys SET blocked_since = now() WHERE ordering_key = 'a'");
  const std::string settle = s.db.qualified("SELECT {schema}.inbox_settle_keys($1::bigint[], $2::uuid[], $3::xid8)");
  const std::string ids = "{" + a0 + "," + b0 + "," + c0 + "}";
  auto conn = s.db.connect();

  // After a handler's raw COMMIT its statements run in transactions of their own: a
  // settlement there would commit without the completion, so it moves nothing.
  {
    pqxx::nontransaction autocommit(conn);
    CHECK(autocommit.exec_params(settle, ids, "{" + a0_token + "," + b0_token + "," + c0_token + "}", "1")[0][0]
              .as<int>() == 0);
  }
  CHECK(s.status_of("a-1") == "WAITING");
  CHECK(s.head_of("a") == "a-0");
  CHECK(s.head_of("b") == "b-0");

  {
    pqxx::work tx(conn);
    const auto xact = tx.exec("SELECT pg_current_xact_id()::text")[0][0].as<std::string>();
    // c-0's token is not the claim's: its key stays where it is.
    const auto stranger = tx.exec("SELECT gen_random_uuid()::text")[0][0].as<std::string>();
    CHECK(tx.exec_params(settle, ids, "{" + a0_token + "," + b0_token + "," + stranger + "}", xact)[0][0].as<int>() ==
          1);
    // The completion that follows finds the keys moved on: its row trigger changes nothing.
    tx.exec(
        s.db.qualified("UPDATE {schema}.inbox_receipts SET status = 'COMPLETED', claim_token = NULL, "
                       "lease_expires_at = NULL, finished_attempts = attempts, completed_at = now() "
                       "WHERE id IN (" +
                       a0 + ", " + b0 + ")"));
    tx.commit();
  }
  CHECK(s.status_of("a-1") == "PENDING");
  CHECK(s.status_of("a-2") == "WAITING");
  CHECK(s.head_of("a") == "a-1");
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_ordering_keys "
                    "WHERE ordering_key = 'a' AND blocked_since IS NULL") == 1);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.inbox_ordering_keys WHERE ordering_key = 'b'") == 0);
  CHECK(s.head_of("c") == "c-0");
  CHECK(s.status_of("c-1") == "WAITING");
  CHECK(s.count("status = 'PENDING'") == 1);
}

TEST_CASE("an accept that commits while a batch's settlement waits for its key becomes the key's head") {
  Setup s;
  {
    Inbox inbox(s.pool, s.inbox_options());
    inbox.accept(keyed("k", 0));
  }
  const auto [k0, k0_token] = s.claim("k-0");
  // An accept of k-1, open: its row trigger holds the key's row until it commits.
  auto accepting_conn = s.db.connect();
  pqxx::work accepting(accepting_conn);
  accepting.exec(s.db.qualified(
      "INSERT INTO {schema}.inbox_receipts (scope_kind, scope_id, source, consumer, message_id, event_type, "
      "schema_version, payload, fingerprint, ordering_key) VALUES ('tenant', 't1', 'test', 'orders.v1', 'k-1', "
      "'thing.happened', 1, '{}', repeat('a', 64), 'k')"));

  auto worker = std::async(std::launch::async, [&] {
    auto conn = s.db.connect();
    pqxx::work tx(conn);
    const auto xact = tx.exec("SELECT pg_current_xact_id()::text")[0][0].as<std::string>();
    tx.exec_params(s.db.qualified("SELECT {schema}.inbox_settle_keys($1::bigint[], $2::uuid[], $3::xid8)"),
                   "{" + k0 + "}", "{" + k0_token + "}", xact);
    tx.exec(
        s.db.qualified("UPDATE {schema}.inbox_receipts SET status = 'COMPLETED', claim_token = NULL, "
                       "lease_expires_at = NULL, finished_attempts = attempts, completed_at = now() WHERE id = " +
                       k0));
    tx.commit();
  });
  const bool waited = eventually(
      [&] {
        return s.db.scalar(
                   "SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE wait_event_type = 'Lock' "
                   "AND pg_catalog.strpos(query, 'inbox_settle_keys') > 0 "
                   "AND pg_catalog.strpos(query, '" +
                   s.db.schema() + "') > 0") == 1;
      },
      10s);
  accepting.commit();
  worker.get();
  REQUIRE(waited);
  // The settlement's search ran after the accept committed: k-1 is the head, not stranded.
  CHECK(s.status_of("k-0") == "COMPLETED");
  CHECK(s.status_of("k-1") == "PENDING");
  CHECK(s.head_of("k") == "k-1");
}

// Keys are scoped (docs/ordering.md, migration 0034): the same key text under two tenants
// is two keys, so one tenant's poison cannot hold another tenant's messages.
TEST_CASE("tenants sending the same order id have separate keys: one tenant's DEAD head holds only its own") {
  Setup s;
  Inbox inbox(s.pool, s.inbox_options(HeadOfLine::block()));
  inbox.accept(keyed("42", 0, "A"));
  inbox.accept(keyed("42", 0, "B"));
  CHECK(s.status_of("A:42-0") == "PENDING");
  CHECK(s.status_of("B:42-0") == "PENDING");  // not WAITING behind tenant A's head

  // Tenant A's message is poison: under block its head goes DEAD and keeps A's key.
  struct PoisonFromA final : InboxHandler {
    std::string table;
    void handle(const nlohmann::json& payload, HandlerContext& context) override {
      if (context.scope.id == "A") throw InboxPermanentError("tenant A sends poison");
      context.tx.exec("INSERT INTO " + table + " (key, seq) VALUES ($1, $2)",
                      payload.at("order").at("id").get<std::string>(), payload.at("seq").get<int>());
    }
  };
  auto handler = std::make_shared<PoisonFromA>();
  handler->table = s.db.qualified("{schema}.app_rows");
  Worker worker(s.pool, s.worker_options(2),
                {{.consumer = kConsumer, .supports = {{"thing.happened", 1}}, .handler = handler}});
  worker.start();
  REQUIRE(eventually([&] { return s.status_of("A:42-0") == "DEAD" && s.status_of("B:42-0") == "COMPLETED"; }, 30s));

  // Later messages of order 42: tenant A's waits behind A's own DEAD head, tenant B's runs.
  inbox.accept(keyed("42", 1, "A"));
  inbox.accept(keyed("42", 1, "B"));
  REQUIRE(eventually([&] { return s.status_of("B:42-1") == "COMPLETED"; }, 30s));
  std::this_thread::sleep_for(300ms);  // several poll intervals: A's second message may not run
  worker.stop();
  CHECK(s.status_of("A:42-1") == "WAITING");
  CHECK(s.written().at("42") == std::vector<int>{0, 1});  // both of tenant B's, in order

  const auto blocked = blocked_keys(*s.pool, s.db.schema());
  REQUIRE(blocked.size() == 1);
  CHECK(blocked[0].scope == Scope::tenant("A"));
  CHECK(blocked[0].key == "42");
  CHECK(blocked[0].waiting == 1);
  const auto report = status(*s.pool, s.db.schema(), {kConsumer});
  REQUIRE(report.blocked_keys.size() == 1);
  CHECK(to_json(report)["blocked_keys"][0]["scope"] == "tenant:A");
  CHECK(to_table(report).find("tenant:A") != std::string::npos);
}

TEST_CASE("a key blocked in two scopes is released in one named scope, and only on request in every scope") {
  Setup s;
  {
    Inbox inbox(s.pool, s.inbox_options(HeadOfLine::block()));
    for (const char* tenant : {"A", "B"})
      for (int seq = 0; seq < 2; ++seq) inbox.accept(keyed("7", seq, tenant));
  }
  // Both heads DEAD, as a worker leaves them after their last attempt.
  s.db.query(
      "UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'HANDLER_PERMANENT' "
      "WHERE message_id IN ('A:7-0', 'B:7-0')");
  REQUIRE(blocked_keys(*s.pool, s.db.schema()).size() == 2);

  // No scope named: two tenants' keys match, so nothing is released.
  try {
    unblock_key(*s.pool, s.db.schema(), {.key = "7", .actor = "test"});
    FAIL("a key blocked in two scopes was released without naming one");
  } catch (const OperatorError& e) {
    CHECK(e.code() == "UNBLOCK_SCOPE_REQUIRED");
  }
  CHECK(s.status_of("A:7-1") == "WAITING");
  CHECK(s.status_of("B:7-1") == "WAITING");

  // The gauges name each blocked scope.
  auto metrics = std::make_shared<Metrics>();
  // An interval of 1 ms: the second collection below computes anew instead of exporting
  // the figures the first one stored.
  BacklogCollector collector(s.pool, metrics,
                             {.schema = s.db.schema(), .declared_consumers = {kConsumer}, .interval = 1ms});
  collector.collect_once();
  {
    const Exposition e(metrics->serialize());
    CHECK(e.value("boxcar_inbox_blocked_keys", {{"consumer", kConsumer}}) == 2);
    CHECK(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "tenant:A"}}) == 1);
    CHECK(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "tenant:B"}}) == 1);
  }

  const auto released = unblock_key(*s.pool, s.db.schema(), {.key = "7", .scope = Scope::tenant("B"), .actor = "test"});
  REQUIRE(released.size() == 1);
  CHECK(released[0].scope == Scope::tenant("B"));
  CHECK(s.status_of("B:7-1") == "PENDING");
  CHECK(s.status_of("A:7-1") == "WAITING");
  std::this_thread::sleep_for(5ms);
  collector.collect_once();
  {
    // Tenant B's series is gone, not left at its last value.
    const Exposition e(metrics->serialize());
    CHECK(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "tenant:A"}}) == 1);
    CHECK_FALSE(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "tenant:B"}}));
  }

  // One scope left: no scope needs naming.
  const auto rest = unblock_key(*s.pool, s.db.schema(), {.key = "7", .actor = "test"});
  REQUIRE(rest.size() == 1);
  CHECK(rest[0].scope == Scope::tenant("A"));
  CHECK(s.status_of("A:7-1") == "PENDING");
}

TEST_CASE("blocked keys of more than twenty scopes are labelled for twenty and the rest summed under (other)") {
  Setup s;
  {
    Inbox inbox(s.pool, s.inbox_options(HeadOfLine::block()));
    std::vector<AcceptRequest> batch;
    for (int t = 0; t < 30; ++t)
      for (int k = 0; k <= t / 10; ++k) batch.push_back(keyed("k" + std::to_string(k), 0, "t" + std::to_string(t)));
    for (const auto& r : inbox.accept_many(batch)) REQUIRE(r.ok());
  }
  s.db.query("UPDATE {schema}.inbox_receipts SET status = 'DEAD', dead_reason = 'HANDLER_PERMANENT'");
  auto metrics = std::make_shared<Metrics>();
  BacklogCollector collector(s.pool, metrics, {.schema = s.db.schema(), .declared_consumers = {kConsumer}});
  collector.collect_once();
  const Exposition e(metrics->serialize());
  // Tenants t0-t9 block one key, t10-t19 two, t20-t29 three: 60 keys in 30 scopes.
  CHECK(e.value("boxcar_inbox_blocked_keys", {{"consumer", kConsumer}}) == 60);
  CHECK(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "tenant:t25"}}) == 3);
  CHECK(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "tenant:t15"}}) == 2);
  CHECK_FALSE(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "tenant:t5"}}));
  CHECK(e.value("boxcar_inbox_blocked_keys_by_scope", {{"consumer", kConsumer}, {"scope", "(other)"}}) == 10);
  CHECK(e.count("boxcar_inbox_blocked_keys_by_scope") == 21);
}
