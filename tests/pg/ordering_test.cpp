// Per-key ordering (docs/ordering.md): an ordered consumer's receipts of one key run one
// at a time, in accept order, whatever the concurrency; a failing head holds only its own
// key, strictly under `block` (until an operator unblocks it) or for N attempts under
// `park_after(N)`.
#include <catch2/catch.hpp>

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <vector>

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
AcceptRequest keyed(const std::string& key, int seq) {
  return {.scope = Scope::tenant("t1"),
          .source = "test",
          .consumer = kConsumer,
          .message_id = key + "-" + std::to_string(seq),
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
  CHECK(unblock_key(*s.pool, s.db.schema(), "good1").empty());  // not blocked: nothing to release
  const auto released = unblock_key(*s.pool, s.db.schema(), "bad", kConsumer);
  REQUIRE(released.size() == 1);
  CHECK(released[0].consumer == kConsumer);
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
