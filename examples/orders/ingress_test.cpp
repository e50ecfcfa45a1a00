// Integration tests of the orders Kafka ingress against librdkafka's mock cluster (over
// TCP) and a fresh inbox schema: what is accepted, dead-lettered and committed is
// checked by counting receipts, dead-letter records and committed offsets.
#include <librdkafka/rdkafka.h>

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "ingress.hpp"
#include "boxcar/testing/mock_kafka.hpp"
#include "boxcar/testing/testing.hpp"

using namespace std::chrono_literals;
using boxcar::testing::MockKafka;
using boxcar::testing::TestSchema;

namespace {

constexpr const char* kDeadLetters = "orders.dlq";

struct Outgoing {
  std::string key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;
};

Outgoing order(const std::string& id, const std::string& value) {
  return {.key = id, .value = value, .headers = {{"message-id", id}, {"type", "order.created"}, {"version", "1"}}};
}

/// Produces `records` to partition 0 of `topic`, in order, and waits until each is acknowledged.
void produce(const MockKafka& kafka, const std::string& topic, const std::vector<Outgoing>& records) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", kafka.bootstrap_servers().c_str(), error, sizeof error);
  rd_kafka_conf_set(conf, "enable.idempotence", "true", error, sizeof error);
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  REQUIRE(producer);
  for (const Outgoing& r : records) {
    rd_kafka_headers_t* headers = rd_kafka_headers_new(r.headers.size());
    for (const auto& [name, value] : r.headers)
      rd_kafka_header_add(headers, name.data(), static_cast<ssize_t>(name.size()), value.data(),
                          static_cast<ssize_t>(value.size()));
    REQUIRE(rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(0),
                              RD_KAFKA_V_KEY(r.key.data(), r.key.size()),
                              RD_KAFKA_V_VALUE(const_cast<char*>(r.value.data()), r.value.size()),
                              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers),
                              RD_KAFKA_V_END) == RD_KAFKA_RESP_ERR_NO_ERROR);
  }
  REQUIRE(rd_kafka_flush(producer, 20000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_destroy(producer);
}

/// The offset `group` committed for partition 0 of `topic`; a negative value when none.
std::int64_t committed_offset(const MockKafka& kafka, const std::string& group, const std::string& topic) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", kafka.bootstrap_servers().c_str(), error, sizeof error);
  rd_kafka_conf_set(conf, "group.id", group.c_str(), error, sizeof error);
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  REQUIRE(consumer);
  rd_kafka_topic_partition_list_t* partitions = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(partitions, topic.c_str(), 0);
  const rd_kafka_resp_err_t err = rd_kafka_committed(consumer, partitions, 10000);
  const std::int64_t offset = partitions->elems[0].offset;
  rd_kafka_topic_partition_list_destroy(partitions);
  rd_kafka_destroy(consumer);
  REQUIRE(err == RD_KAFKA_RESP_ERR_NO_ERROR);
  return offset;
}

orders::ConsumerOptions ingress_options(const MockKafka& kafka) {
  return {.bootstrap_servers = kafka.bootstrap_servers(),
          .group_id = "orders-ingress",
          .topic = orders::kTenantTopicPattern,
          .dead_letter_topic = kDeadLetters,
          .idle_exit = 2s,
          .first_record_wait = 30s};
}

std::string header(const boxcar::testing::KafkaRecordRead& record, const std::string& name) {
  const auto it = record.headers.find(name);
  return it == record.headers.end() ? "(absent)" : it->second;
}

}  // namespace

TEST_CASE(
    "a poison record in the middle of a batch is dead-lettered with its reason and coordinates, "
    "and the records after it are accepted and committed") {
  TestSchema db;
  MockKafka kafka;
  const std::string topic = orders::tenant_topic("acme");
  kafka.create_topic(topic, 1);
  kafka.create_topic(kDeadLetters, 1);
  Outgoing poison = order("order-2", "{not json");
  poison.headers.emplace_back("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  Outgoing no_id = order("order-4", R"({"orderId":"o-4"})");
  no_id.headers.erase(no_id.headers.begin());
  Outgoing bad_version = order("order-6", R"({"orderId":"o-6"})");
  bad_version.headers.back().second = "one";
  produce(kafka, topic,
          {order("order-1", R"({"orderId":"o-1"})"), poison, order("order-3", R"({"orderId":"o-3"})"), no_id,
           order("order-5", R"({"orderId":"o-5"})"), bad_version,
           order("order-1", R"({"orderId":"o-1","total":2})"),  // the id reused with other content
           order("order-7", R"({"orderId":"o-7"})")});

  boxcar::Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {orders::kProjection}, .notify = false});
  std::atomic<bool> stop{false};
  const nlohmann::json counts = orders::accept_topic(inbox, ingress_options(kafka), orders::order_request, stop);
  INFO("counts " << counts.dump());
  CHECK(counts.value("accepted", 0) == 4);
  CHECK(counts.value("invalid", 0) == 3);
  CHECK(counts.value("conflict", 0) == 1);

  // The records after the poison ones are accepted, under the topic's tenant.
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 4);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE scope_kind = 'tenant' AND scope_id = 'acme' "
                 "AND message_id IN ('order-1', 'order-3', 'order-5', 'order-7')") == 4);
  // Every offset is committed: the partition moved past the poison.
  CHECK(committed_offset(kafka, "orders-ingress", topic) == 8);

  const auto dead = kafka.read_all(kDeadLetters, 4, 20s);
  REQUIRE(dead.size() == 4);
  std::map<std::string, boxcar::testing::KafkaRecordRead> by_offset;
  for (const auto& r : dead) by_offset[header(r, "dlq.original.offset")] = r;
  REQUIRE(by_offset.count("1") == 1);
  const auto& not_json = by_offset["1"];
  CHECK(header(not_json, "dlq.error.code") == "JSON_PARSE_ERROR");
  CHECK(header(not_json, "dlq.error.message").starts_with("value: "));
  CHECK(header(not_json, "dlq.original.topic") == topic);
  CHECK(header(not_json, "dlq.original.partition") == "0");
  CHECK(header(not_json, "dlq.consumer.group") == "orders-ingress");
  // The original record travels unchanged: key, value and headers.
  CHECK(not_json.key == "order-2");
  CHECK(not_json.value == "{not json");
  CHECK(header(not_json, "message-id") == "order-2");
  CHECK(header(not_json, "traceparent") == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  CHECK(header(by_offset["3"], "dlq.error.code") == "KAFKA_HEADER_MISSING");
  CHECK(header(by_offset["5"], "dlq.error.code") == "KAFKA_HEADER_INVALID");
  CHECK(header(by_offset["6"], "dlq.error.code") == "IDENTITY_CONFLICT");
  CHECK(by_offset["6"].value == R"({"orderId":"o-1","total":2})");
}

TEST_CASE(
    "the tenant comes from the topic a record was written to, and a tenant header naming another is "
    "dead-lettered") {
  TestSchema db;
  MockKafka kafka;
  kafka.create_topic(orders::tenant_topic("acme"), 1);
  kafka.create_topic(orders::tenant_topic("globex"), 1);
  kafka.create_topic(kDeadLetters, 1);
  Outgoing forged = order("order-9", R"({"orderId":"o-9"})");
  forged.headers.emplace_back("tenant", "acme");  // written to globex's topic
  Outgoing honest = order("order-8", R"({"orderId":"o-8"})");
  honest.headers.emplace_back("tenant", "globex");
  produce(kafka, orders::tenant_topic("acme"), {order("order-1", R"({"orderId":"o-1"})")});
  produce(kafka, orders::tenant_topic("globex"), {order("order-1", R"({"orderId":"o-1"})"), forged, honest});

  boxcar::Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {orders::kProjection}, .notify = false});
  std::atomic<bool> stop{false};
  const nlohmann::json counts = orders::accept_topic(inbox, ingress_options(kafka), orders::order_request, stop);
  INFO("counts " << counts.dump());
  // The same message id on two tenants' topics is two identities.
  const auto receipts = [&](const std::string& message_id, const std::string& tenant) {
    return db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = '" + message_id +
                    "' AND scope_kind = 'tenant' AND scope_id = '" + tenant + "'");
  };
  CHECK(receipts("order-1", "acme") == 1);
  CHECK(receipts("order-1", "globex") == 1);
  CHECK(receipts("order-8", "globex") == 1);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'order-9'") == 0);
  const auto dead = kafka.read_all(kDeadLetters, 1, 20s);
  REQUIRE(dead.size() == 1);
  CHECK(header(dead[0], "dlq.error.code") == "TENANT_MISMATCH");
  CHECK(header(dead[0], "message-id") == "order-9");
}

TEST_CASE(
    "a storage failure commits and dead-letters nothing, and the same batch is accepted once the database "
    "is back") {
  TestSchema db;
  MockKafka kafka;
  const std::string topic = orders::tenant_topic("acme");
  kafka.create_topic(topic, 1);
  kafka.create_topic(kDeadLetters, 1);
  produce(kafka, topic,
          {order("order-1", R"({"orderId":"o-1"})"), order("order-2", "{not json"),
           order("order-3", R"({"orderId":"o-3"})")});

  {
    // A database nobody listens on: every accept_many is an InboxStorageError.
    auto dead_pool = boxcar::ConnectionPool::create(
        {.url = "postgresql://boxcar@127.0.0.1:1/postgres", .size = 1, .acquire_timeout = 500ms});
    boxcar::Inbox unreachable(dead_pool, {.schema = db.schema(), .consumers = {orders::kProjection}, .notify = false});
    std::atomic<bool> stop{false};
    std::atomic<int> attempts{0};
    std::map<std::string, int> counts;
    std::thread ingress([&] {
      orders::consume_batches(ingress_options(kafka), stop, [&](const std::vector<orders::KafkaRecord>& batch) {
        ++attempts;
        return orders::accept_batch(unreachable, batch, orders::order_request, counts);
      });
    });
    // The batch fails, is rewound and consumed again: at least twice.
    const auto deadline = std::chrono::steady_clock::now() + 30s;
    while (attempts < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(50ms);
    stop = true;
    ingress.join();
    CHECK(attempts >= 2);
    CHECK(counts.empty());
  }
  CHECK(committed_offset(kafka, "orders-ingress", topic) < 0);
  CHECK(kafka.read_all(kDeadLetters, 0, 5s).empty());

  boxcar::Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {orders::kProjection}, .notify = false});
  std::atomic<bool> stop{false};
  const nlohmann::json counts = orders::accept_topic(inbox, ingress_options(kafka), orders::order_request, stop);
  INFO("counts " << counts.dump());
  CHECK(counts.value("accepted", 0) == 2);
  CHECK(counts.value("invalid", 0) == 1);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 2);
  CHECK(committed_offset(kafka, "orders-ingress", topic) == 3);
  CHECK(kafka.read_all(kDeadLetters, 1, 20s).size() == 1);
}

TEST_CASE(
    "dead letters the broker does not confirm leave the batch uncommitted, and the next attempt "
    "dead-letters and commits it") {
  TestSchema db;
  MockKafka kafka;
  const std::string topic = orders::tenant_topic("acme");
  kafka.create_topic(topic, 1);
  kafka.create_topic(kDeadLetters, 1);
  produce(kafka, topic, {order("order-1", R"({"orderId":"o-1"})"), order("order-2", "{not json")});
  // The first dead-letter Produce request is refused with a permanent error.
  constexpr int kTopicAuthorizationFailed = 29;
  kafka.fail_next_produce_requests(1, kTopicAuthorizationFailed);

  boxcar::Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {orders::kProjection}, .notify = false});
  std::atomic<bool> stop{false};
  int attempts = 0;
  std::map<std::string, int> counts;
  orders::consume_batches(ingress_options(kafka), stop, [&](const std::vector<orders::KafkaRecord>& batch) {
    ++attempts;
    return orders::accept_batch(inbox, batch, orders::order_request, counts);
  });
  CHECK(attempts == 2);  // refused, rewound, consumed again
  CHECK(counts["accepted"] == 1);
  CHECK(counts["duplicate"] == 1);  // the second attempt finds order-1 already retained
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 1);
  CHECK(committed_offset(kafka, "orders-ingress", topic) == 2);
  const auto dead = kafka.read_all(kDeadLetters, 1, 20s);
  REQUIRE(dead.size() == 1);
  CHECK(header(dead[0], "dlq.original.offset") == "1");
}

TEST_CASE("a downstream record of a global event needs no tenant header and keeps its global scope") {
  orders::KafkaRecord record;
  record.topic = orders::kProjectedTopic;
  record.value = R"({"orderId":"o-1"})";
  record.headers = {{"event_id", "0190f3c2-7d1e-7000-8000-000000000001"},
                    {"event_type", "order.projected"},
                    {"schema_version", "1"},
                    {"tenant_scope", "global"}};
  const auto global = orders::projected_request(record);
  REQUIRE(global.request);
  CHECK(global.request->scope == boxcar::Scope::global());

  record.headers = {{"event_id", "0190f3c2-7d1e-7000-8000-000000000002"},
                    {"event_type", "order.projected"},
                    {"schema_version", "1"},
                    {"tenant_scope", "tenant"},
                    {"tenant_id", "acme"}};
  const auto tenant = orders::projected_request(record);
  REQUIRE(tenant.request);
  CHECK(tenant.request->scope == boxcar::Scope::tenant("acme"));

  record.headers.pop_back();  // a tenant event without its tenant id can never be accepted
  CHECK_FALSE(orders::projected_request(record).request);
}
