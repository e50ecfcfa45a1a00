// examples/orders: the whole Boxcar pipeline as one application binary with several
// roles, each run as its own process by scripts/demo.
//
//   orders_demo mock-kafka            librdkafka's mock cluster; prints BOOTSTRAP=...
//   orders_demo init                  migrations + the application's own table
//   orders_demo produce N             N order.created records on the tenants' topics
//                                     (+ redeliveries, 1 conflict, 1 poison record)
//   orders_demo ingress               Kafka -> inbox (accept_many per poll, dead letters
//                                     to orders.dlq, commit after)
//   orders_demo worker | publisher    run_cli roles: project orders, emit order.projected
//                                     (ORDERS_BATCH_HANDLER=1: the batch handler variant)
//   orders_demo downstream            order.projected -> a second inbox keyed by event id,
//                                     then a replay of the topic (every record a duplicate)
//   orders_demo status | dead | ...   the other run_cli commands
//
// Configuration: BOXCAR_* like any Boxcar process (docs/runtime.md).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <span>
#include <thread>

#include <spdlog/spdlog.h>

#include "boxcar/runtime/runtime.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/roles.hpp"
#include "boxcar/core/shutdown_signals.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "ingress.hpp"
#include "projection.hpp"

namespace {

using orders::kDownstream;
using orders::kProjectedTopic;
using orders::kProjection;

// One topic per tenant (tenant.<tenant>.orders): the topic authenticates the tenant.
const std::vector<std::string> kTenants = {"acme", "globex", "initech"};
constexpr const char* kDeadLetterTopic = "orders.dlq";

std::string bootstrap(const boxcar::RuntimeConfig& config) {
  const auto it = config.publisher.kafka.find("bootstrap.servers");
  if (it == config.publisher.kafka.end())
    throw boxcar::ConfigError("kafka.bootstrap.servers", "set BOXCAR_KAFKA_BOOTSTRAP_SERVERS");
  return it->second;
}

int mock_kafka() {
  boxcar::ShutdownSignals signals;
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "0", error, sizeof error);
  rd_kafka_conf_set(conf, "socket.nagle.disable", "true", error, sizeof error);
  rd_kafka_t* handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(handle, 3);
  for (const std::string& tenant : kTenants)
    rd_kafka_mock_topic_create(cluster, orders::tenant_topic(tenant).c_str(), 3, 3);
  rd_kafka_mock_topic_create(cluster, kDeadLetterTopic, 1, 3);
  rd_kafka_mock_topic_create(cluster, kProjectedTopic, 3, 3);
  rd_kafka_mock_topic_create(cluster, (std::string(kProjectedTopic) + ".dlq").c_str(), 1, 3);
  std::cout << "BOOTSTRAP=" << rd_kafka_mock_cluster_bootstraps(cluster) << std::endl;
  signals.wait_for_shutdown();
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(handle);
  return 0;
}

// The one step that runs as the migrator (scripts/demo: a LOGIN user with CREATEROLE, the
// only one that may do DDL): migrate, create and grant the least-privilege roles
// (docs/security.md, section 2), create the application's table and grant the worker role
// what the handler writes. Every other process then runs as a user holding only its role.
int init(const boxcar::RuntimeConfig& config) {
  boxcar::migrate(config.pool.url, {.schema = config.schema});
  const boxcar::RolesOptions roles{.schema = config.schema};
  boxcar::apply_roles(config.pool.url, roles);
  const boxcar::RoleNames names = boxcar::role_names(roles);
  const std::string table = boxcar::quote_identifier(config.schema) + ".order_projection";
  boxcar::Runtime runtime(config);
  boxcar::Tx tx = runtime.pool()->begin();
  tx.exec(orders::projection_table_ddl(config.schema));
  tx.exec("ALTER TABLE " + table + " OWNER TO " + boxcar::quote_identifier(names.migrator));
  tx.exec("GRANT INSERT ON " + table + " TO " + boxcar::quote_identifier(names.worker));
  tx.commit();
  return 0;
}

int produce(const boxcar::RuntimeConfig& config, int count) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap(config).c_str(), error, sizeof error);
  rd_kafka_conf_set(conf, "enable.idempotence", "true", error, sizeof error);
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  int records = 0;
  const auto send = [&](int i, double total, std::string value = {}) {
    const std::string id = "order-" + std::to_string(i);
    // Each tenant writes its own topic; in production its principal may write no other.
    const std::string topic = orders::tenant_topic(kTenants[i % kTenants.size()]);
    if (value.empty()) value = nlohmann::json{{"orderId", "o-" + std::to_string(i)}, {"total", total}}.dump();
    rd_kafka_headers_t* headers = rd_kafka_headers_new(3);
    rd_kafka_header_add(headers, "message-id", -1, id.data(), static_cast<ssize_t>(id.size()));
    rd_kafka_header_add(headers, "type", -1, "order.created", -1);
    rd_kafka_header_add(headers, "version", -1, "1", -1);
    rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_KEY(id.data(), id.size()),
                      RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_END);
    ++records;
  };
  for (int i = 0; i < count; ++i) {
    send(i, 10.0 + i);
    if (i % 10 == 0) send(i, 10.0 + i);  // the broker redelivers: same id, same content
  }
  send(1, 999.0);               // a reused id with different content: an identity conflict
  send(count, 0, "{not json");  // a poison record: dead-lettered, the partition moves on
  rd_kafka_flush(producer, 30000);
  rd_kafka_destroy(producer);
  std::cout << nlohmann::json{{"produced_records", records}, {"distinct_orders", count}}.dump() << std::endl;
  return 0;
}

// Set by SIGTERM/SIGINT: consumers then leave their group cleanly.
std::atomic<bool> stop_requested{false};

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "mock-kafka") return mock_kafka();
    if (command == "init" || command == "produce" || command == "ingress" || command == "downstream") {
      // Before librdkafka starts its threads: only sigwait sees SIGTERM/SIGINT.
      static boxcar::ShutdownSignals signals;
      std::thread([] {
        signals.wait_for_shutdown();
        stop_requested = true;
      }).detach();
      const auto config = boxcar::load_config();
      if (command == "init") return init(config);
      if (command == "produce") return produce(config, argc > 2 ? std::stoi(argv[2]) : 100);
      boxcar::Runtime runtime(config);
      const orders::ConsumerOptions base{.bootstrap_servers = bootstrap(config), .idle_exit = std::chrono::seconds(3)};
      if (command == "ingress") {
        auto options = base;
        options.group_id = "orders-ingress";
        options.topic = orders::kTenantTopicPattern;  // every tenant's topic, new ones included
        const char* dead_letter_topic = std::getenv("ORDERS_DEAD_LETTER_TOPIC");
        options.dead_letter_topic = dead_letter_topic && *dead_letter_topic ? dead_letter_topic : kDeadLetterTopic;
        std::cout << nlohmann::json{{"ingress", orders::accept_topic(runtime.inbox(), options, orders::order_request,
                                                                     stop_requested)}}
                         .dump()
                  << std::endl;
        return 0;
      }
      auto options = base;
      options.topic = kProjectedTopic;  // dead letters: orders.projected.dlq
      options.group_id = "inventory";
      const auto first = orders::accept_topic(runtime.inbox(), options, orders::projected_request, stop_requested);
      options.group_id = "inventory-replay";  // a new group reads everything again: a redelivery of it all
      const auto replay = orders::accept_topic(runtime.inbox(), options, orders::projected_request, stop_requested);
      std::cout << nlohmann::json{{"downstream", first}, {"downstream_replay", replay}}.dump() << std::endl;
      return 0;
    }
  } catch (const boxcar::Error& e) {
    std::cerr << "orders_demo: " << e.code() << ": " << e.what() << "\n";
    return e.code() == "CONFIG_INVALID" ? 2 : 1;
  } catch (const std::exception& e) {
    std::cerr << "orders_demo: " << e.what() << "\n";
    return 1;
  }
  return boxcar::run_cli(argc, argv, [](boxcar::Runtime& runtime) {
    const char* batch = std::getenv("ORDERS_BATCH_HANDLER");
    if (batch && std::string(batch) == "1")
      return std::vector<boxcar::HandlerRegistration>{
          {.consumer = kProjection,
           .supports = {{"order.created", 1}},
           .batch_handler = std::make_shared<orders::OrderProjectionBatch>(runtime.outbox(), runtime.config().schema)}};
    return std::vector<boxcar::HandlerRegistration>{
        {.consumer = kProjection,
         .supports = {{"order.created", 1}},
         .handler = std::make_shared<orders::OrderProjection>(runtime.outbox(), runtime.config().schema)}};
  });
}
