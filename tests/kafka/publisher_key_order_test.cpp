// Per-key order from emit to topic with several publisher PROCESSES (`boxcar publisher`)
// against librdkafka's mock cluster over TCP: 50 keys × 40 events,
// emitted while three publishers drain them, must reach the topic with each key's events
// in commit order, with and without produce failures. Checked by consuming the topic and
// counting rows and records.
#include <catch2/catch.hpp>

#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <map>
#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/publisher/publisher.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "publisher_options.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;

namespace {

constexpr int kKeys = 50;
constexpr int kEventsPerKey = 40;
constexpr int kEvents = kKeys * kEventsPerKey;
const std::string kTopic = "orders";

// One `boxcar publisher` process, killed when it goes out of scope.
class PublisherProcess {
 public:
  PublisherProcess(const TestDatabase& db, const MockKafka& kafka) {
    pid_ = fork();
    if (pid_ == 0) {
      const std::string bootstrap = "bootstrap.servers=" + kafka.bootstrap_servers();
      execl(BOXCAR_CLI_PATH, BOXCAR_CLI_PATH, "--database-url", db.url().c_str(), "--schema", db.schema().c_str(),
            "--kafka", bootstrap.c_str(), "--set", "publisher.batch_size=20", "--set",
            "publisher.delivery_timeout_ms=3000", "--set", "publisher.lease_ms=8000", "--set",
            "publisher.poll_interval_ms=100", "--set", "publisher.backoff_base_ms=10", "--set",
            "publisher.backoff_cap_ms=100", "--http-listen", "", "publisher", static_cast<char*>(nullptr));
      _exit(127);
    }
    REQUIRE(pid_ > 0);
  }
  ~PublisherProcess() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
  PublisherProcess(const PublisherProcess&) = delete;
  PublisherProcess& operator=(const PublisherProcess&) = delete;

 private:
  pid_t pid_ = -1;
};

struct Setup {
  TestDatabase db;
  MockKafka kafka;
  std::shared_ptr<ConnectionPool> pool = db.pool(4);
  OutboxEmitter outbox{pool, {.schema = db.schema()}};  // NOTIFY wakes idle publishers
  Setup() { kafka.create_topic(kTopic, 4); }

  // Round r emits event r of every key, in transactions of 10 keys each: per key, commit
  // order is r order. Keys are taken in the same order by every transaction (no deadlock).
  void emit_all() {
    for (int round = 0; round < kEventsPerKey; ++round)
      for (int first = 0; first < kKeys; first += 10) {
        Tx tx = pool->begin();
        for (int k = first; k < first + 10; ++k)
          outbox.emit(tx,
                      OutboxMessage{.event_type = "order.changed",
                                    .schema_version = 1,
                                    .topic = kTopic,
                                    .payload = {{"key", k}, {"seq", round}}},
                      {.scope = Scope::tenant("t1"), .key = "order-" + std::to_string(k)});
        tx.commit();
      }
  }
  std::int64_t published() const {
    return db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE status = 'PUBLISHED'");
  }
};

// Each key's sequence numbers in topic order (partition, offset), first copy of each event
// only: at least once means a redelivered event may appear again later, which a consumer
// deduplicates by event id.
std::map<std::string, std::vector<int>> first_copies_by_key(std::vector<KafkaRecordRead> records) {
  std::sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return std::tie(a.partition, a.offset) < std::tie(b.partition, b.offset);
  });
  std::set<std::string> seen;
  std::map<std::string, std::vector<int>> by_key;
  for (const auto& r : records)
    if (seen.insert(r.headers.at("event_id")).second)
      by_key[r.key].push_back(nlohmann::json::parse(r.value).at("seq").get<int>());
  return by_key;
}

void check_every_key_in_order(const Setup& s, const std::vector<KafkaRecordRead>& records) {
  std::set<std::pair<int, std::int64_t>> positions;
  std::set<std::string> event_ids;
  for (const auto& r : records) {
    positions.insert({r.partition, r.offset});
    event_ids.insert(r.headers.at("event_id"));
  }
  CHECK(s.published() == kEvents);
  CHECK(event_ids.size() == static_cast<std::size_t>(kEvents));  // nothing lost
  CHECK(positions.size() >= static_cast<std::size_t>(kEvents));
  const auto by_key = first_copies_by_key(records);
  REQUIRE(by_key.size() == static_cast<std::size_t>(kKeys));
  std::vector<int> expected(kEventsPerKey);
  for (int i = 0; i < kEventsPerKey; ++i) expected[i] = i;
  int keys_in_order = 0;
  for (const auto& [key, seqs] : by_key) {
    INFO("key " << key);
    CHECK(seqs == expected);
    if (seqs == expected) ++keys_in_order;
  }
  CHECK(keys_in_order == kKeys);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_ordering_keys") == 0);
}

}  // namespace

TEST_CASE("three publisher processes put each key's events in the topic in the order their transactions committed") {
  Setup s;
  PublisherProcess a(s.db, s.kafka), b(s.db, s.kafka), c(s.db, s.kafka);
  s.emit_all();  // while the publishers drain
  REQUIRE(eventually([&] { return s.published() == kEvents; }, 120s));
  check_every_key_in_order(s, s.kafka.read_all(kTopic, kEvents, 60s));
}

TEST_CASE("with produce failures injected, three publisher processes still keep each key's events in order") {
  Setup s;
  PublisherProcess a(s.db, s.kafka), b(s.db, s.kafka), c(s.db, s.kafka);
  // TOPIC_AUTHORIZATION_FAILED is not retried by librdkafka: the batch's delivery reports
  // fail and its events become RETRYABLE (the failed head of each key then keeps its key).
  // Injected three times while the events arrive.
  for (int burst = 0; burst < 3; ++burst) {
    s.kafka.fail_next_produce_requests(15, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
    if (burst == 0) s.emit_all();
    std::this_thread::sleep_for(300ms);
  }
  REQUIRE(eventually([&] { return s.published() == kEvents; }, 120s));
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_events WHERE attempts > 1") > 0);  // failures happened
  check_every_key_in_order(s, s.kafka.read_all(kTopic, kEvents, 60s));
}

TEST_CASE("a publisher's mark aborted by a deadlock with an emitter of two keys is run again and loses nothing") {
  Setup s;
  const auto emit = [&](TxView tx, const std::string& key, int seq) {
    s.outbox.emit(tx,
                  OutboxMessage{.event_type = "order.changed",
                                .schema_version = 1,
                                .topic = kTopic,
                                .payload = {{"key", key}, {"seq", seq}}},
                  {.scope = Scope::tenant("t1"), .key = key});
  };
  for (const auto* key : {"k1", "k2"}) {
    Tx tx = s.pool->begin();
    emit(tx, key, 0);
    tx.commit();
  }
  // An emitting transaction takes k2 (behind its head, WAITING) and keeps it.
  Tx emitter = s.pool->begin();
  // This session waits 10 s before it looks for a deadlock, the publisher's 1 s (the
  // default): the publisher's mark is the one PostgreSQL aborts.
  emitter.exec("SET LOCAL deadlock_timeout = '10s'");
  emit(emitter, "k2", 1);

  // The publisher claims both heads, delivers them, and its mark leaves k1 (its last event:
  // the key row is deleted) then waits for k2.
  Publisher publisher(s.pool, fast_publisher_options(s.db.schema(), s.kafka));
  auto drained = std::async(std::launch::async, [&] { return publisher.drain(); });
  REQUIRE(eventually(
      [&] {
        return s.db.scalar(
                   "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE "
                   "'%PUBLISHED%' AND pg_catalog.strpos(query, '" +
                   s.db.schema() + "') > 0") == 1;
      },
      30s));
  // Now the emitter takes k1, whose row the mark holds: a deadlock. The mark is aborted,
  // the emitter goes on, and the mark runs again once the emitter commits.
  emit(emitter, "k1", 1);
  emitter.commit();
  CHECK(drained.get() >= 2);  // before the retry, the 40P01 escaped drain()
  publisher.drain();
  CHECK(s.published() == 4);
  CHECK(s.db.scalar("SELECT count(*) FROM {schema}.outbox_ordering_keys") == 0);
  const auto by_key = first_copies_by_key(s.kafka.read_all(kTopic, 4, 30s));
  CHECK(by_key.at("k1") == std::vector<int>{0, 1});
  CHECK(by_key.at("k2") == std::vector<int>{0, 1});
}
