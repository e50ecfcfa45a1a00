// examples/orders: the whole Boxcar pipeline as one application binary with several
// roles, each run as its own process by scripts/demo.
//
//   orders_demo mock-kafka            librdkafka's mock cluster; prints BOOTSTRAP=...
//   orders_demo init                  migrations + the application's own table
//   orders_demo produce N             N order.created records (+ redeliveries, 1 conflict)
//   orders_demo ingress               Kafka -> inbox (accept_many per poll, commit after)
//   orders_demo worker | publisher    run_cli roles: project orders, emit order.projected
//   orders_demo downstream            order.projected -> a second inbox keyed by event id,
//                                     then a replay of the topic (every record a duplicate)
//   orders_demo status | dead | ...   the other run_cli commands
//
// Configuration: BOXCAR_* like any Boxcar process (docs/runtime.md).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>
#include <iostream>
#include <thread>

#include <spdlog/spdlog.h>

#include "boxcar/host/runtime.hpp"
#include "boxcar/runtime/migrate.hpp"
#include "boxcar/runtime/shutdown_signals.hpp"
#include "boxcar/runtime/sql_identifier.hpp"
#include "kafka_batches.hpp"

namespace {

constexpr const char* kOrdersTopic = "orders";
constexpr const char* kProjectedTopic = "orders.projected";
constexpr const char* kProjection = "orders.projection.v1";
constexpr const char* kDownstream = "inventory.v1";

struct OrderProjected {
  static constexpr std::string_view event_type = "order.projected";
  static constexpr int schema_version = 1;
  static constexpr std::string_view topic = kProjectedTopic;
  std::string order_id;
  double total;
};
void to_json(nlohmann::json& j, const OrderProjected& e) { j = {{"orderId", e.order_id}, {"total", e.total}}; }

// The application's handler: one business row and one event, both in context.tx.
class OrderProjection final : public boxcar::InboxHandler {
 public:
  OrderProjection(boxcar::OutboxEmitter& outbox, const std::string& schema)
      : outbox_(outbox), table_(boxcar::quote_identifier(schema) + ".order_projection") {}
  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    const std::string order_id = payload.at("orderId");
    const double total = payload.at("total");
    context.tx.exec("INSERT INTO " + table_ + " (tenant_id, order_id, total) VALUES ($1, $2, $3)", context.scope.id,
                    order_id, total);
    outbox_.emit(context.tx, OrderProjected{order_id, total},
                 {.scope = context.scope, .causation_id = context.message_id});
  }

 private:
  boxcar::OutboxEmitter& outbox_;
  std::string table_;
};

std::string bootstrap(const boxcar::RuntimeConfig& config) {
  const auto it = config.kafka.find("bootstrap.servers");
  if (it == config.kafka.end()) throw boxcar::ConfigError("kafka.bootstrap.servers", "set BOXCAR_KAFKA_BOOTSTRAP_SERVERS");
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
  rd_kafka_mock_topic_create(cluster, kOrdersTopic, 3, 3);
  rd_kafka_mock_topic_create(cluster, kProjectedTopic, 3, 3);
  std::cout << "BOOTSTRAP=" << rd_kafka_mock_cluster_bootstraps(cluster) << std::endl;
  signals.wait_for_shutdown();
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(handle);
  return 0;
}

int init(const boxcar::RuntimeConfig& config) {
  boxcar::migrate(config.database_url, {.schema = config.schema});
  boxcar::Runtime runtime(config);
  boxcar::Tx tx = runtime.pool()->begin();
  tx.exec("CREATE TABLE IF NOT EXISTS " + boxcar::quote_identifier(config.schema) +
          ".order_projection (tenant_id text NOT NULL, order_id text NOT NULL, total numeric NOT NULL)");
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
  const auto send = [&](int i, double total) {
    const std::string id = "order-" + std::to_string(i);
    const std::string tenant = "tenant-" + std::to_string(i % 3);
    const std::string value = nlohmann::json{{"orderId", "o-" + std::to_string(i)}, {"total", total}}.dump();
    rd_kafka_headers_t* headers = rd_kafka_headers_new(4);
    rd_kafka_header_add(headers, "message-id", -1, id.data(), static_cast<ssize_t>(id.size()));
    rd_kafka_header_add(headers, "type", -1, "order.created", -1);
    rd_kafka_header_add(headers, "version", -1, "1", -1);
    rd_kafka_header_add(headers, "tenant", -1, tenant.data(), static_cast<ssize_t>(tenant.size()));
    rd_kafka_producev(producer, RD_KAFKA_V_TOPIC(kOrdersTopic), RD_KAFKA_V_KEY(tenant.data(), tenant.size()),
                      RD_KAFKA_V_VALUE(const_cast<char*>(value.data()), value.size()),
                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(headers), RD_KAFKA_V_END);
    ++records;
  };
  for (int i = 0; i < count; ++i) {
    send(i, 10.0 + i);
    if (i % 10 == 0) send(i, 10.0 + i);  // the broker redelivers: same id, same content
  }
  send(1, 999.0);  // a reused id with different content: an identity conflict
  rd_kafka_flush(producer, 30000);
  rd_kafka_destroy(producer);
  std::cout << nlohmann::json{{"produced_records", records}, {"distinct_orders", count}}.dump() << std::endl;
  return 0;
}

boxcar::AcceptRequest order_request(const orders::KafkaRecord& r) {
  return {.scope = boxcar::Scope::tenant(r.headers.at("tenant")),
          .source = std::string("kafka:") + kOrdersTopic,
          .consumer = kProjection,
          .message_id = r.headers.at("message-id"),
          .event_type = r.headers.at("type"),
          .schema_version = std::stoi(r.headers.at("version")),
          .payload = nlohmann::json::parse(r.value)};
}

boxcar::AcceptRequest projected_request(const orders::KafkaRecord& r) {
  return {.scope = boxcar::Scope::tenant(r.headers.at("tenant_id")),
          .source = std::string("kafka:") + kProjectedTopic,
          .consumer = kDownstream,
          .message_id = r.headers.at("event_id"),  // the stable id every publish carries
          .event_type = r.headers.at("event_type"),
          .schema_version = std::stoi(r.headers.at("schema_version")),
          .payload = nlohmann::json::parse(r.value),
          .metadata = {.causation_id = r.headers.count("causation_id") ? r.headers.at("causation_id") : ""}};
}

// Set by SIGTERM/SIGINT: consumers then leave their group cleanly.
std::atomic<bool> stop_requested{false};

// Accepts every poll batch with accept_many; the consumer commits only afterwards.
nlohmann::json accept_topic(boxcar::Inbox& inbox, const orders::ConsumerOptions& options,
                            boxcar::AcceptRequest (*to_request)(const orders::KafkaRecord&)) {
  std::map<std::string, int> counts;
  const std::atomic<bool>& stop = stop_requested;
  orders::consume_batches(options, stop, [&](const std::vector<orders::KafkaRecord>& batch) {
    std::vector<boxcar::AcceptRequest> requests;
    for (const auto& record : batch) requests.push_back(to_request(record));
    // InboxStorageError escapes: the batch is not committed and is consumed again.
    for (const auto& result : inbox.accept_many(requests)) {
      if (result.ok()) {
        ++counts[result.receipt().kind == boxcar::Receipt::Kind::Accepted ? "accepted" : "duplicate"];
      } else {
        // Conflict or invalid: rejected for good (a dead-letter topic in a real service),
        // acknowledged so it is never retried in a loop.
        ++counts[result.error_code() == "IDENTITY_CONFLICT" ? "conflict" : "invalid"];
        spdlog::warn("rejected {} record: {}", options.topic, result.error_code());
      }
    }
  });
  return counts;
}

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
        options.topic = kOrdersTopic;
        std::cout << nlohmann::json{{"ingress", accept_topic(runtime.inbox(), options, order_request)}}.dump() << std::endl;
        return 0;
      }
      auto options = base;
      options.topic = kProjectedTopic;
      options.group_id = "inventory";
      const auto first = accept_topic(runtime.inbox(), options, projected_request);
      options.group_id = "inventory-replay";  // a new group reads everything again: a redelivery of it all
      const auto replay = accept_topic(runtime.inbox(), options, projected_request);
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
    return std::vector<boxcar::HandlerRegistration>{
        {.consumer = kProjection,
         .supports = {{"order.created", 1}},
         .handler = std::make_shared<OrderProjection>(runtime.outbox(), runtime.config().schema)}};
  });
}
