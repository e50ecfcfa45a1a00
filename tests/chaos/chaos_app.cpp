// The application the fault campaign (scripts/chaos) runs: one binary, several roles, each
// its own process, like examples/orders. Links only public targets.
//
//   chaos_app mock-kafka               librdkafka's mock cluster (3 brokers); prints
//                                      BOOTSTRAP=...; then obeys fault commands on stdin:
//                                      "down", "up", "errors <count> <kafka error code>"
//   chaos_app pg-proxy <host> <port>   boxcar::testing::TcpProxy in front of PostgreSQL;
//                                      prints PORT=...; obeys "commit-reset" (the next COMMIT
//                                      is forwarded, its answer swallowed, the client reset)
//                                      on stdin. SIGSTOP on this process is a blackhole.
//   chaos_app init                     migrations + the application's table
//   chaos_app ingress <from> <to> <rate/s> <poison every>
//                                      accepts identities msg-<from>..msg-<to>; prints each
//                                      identity once accept() returned (the ledger)
//   chaos_app worker | publisher       run_cli roles; the handler below
//   chaos_app downstream <idle s>      reads the events topic from the start; prints
//                                      "event_id<TAB>partition<TAB>offset" per record
//
// The handler writes one row per message into chaos_rows, a table WITHOUT a unique
// constraint (so a double commit shows as two rows), and emits one chaos.done event.
// Environment read by the handler (set per fault by scripts/chaos):
//   CHAOS_POISON=permanent|abort   what a poison message does (default permanent)
//   CHAOS_SLOW_EVERY=K, CHAOS_SLOW_MS=M
//                                  every K-th message sleeps M ms on its first attempt,
//                                  ignoring its cancellation signal (over its deadline)
// and BOXCAR_FAILPOINT=worker.in_handler:... (failpoint builds only).
#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>

#include "boxcar/core/detail/failpoint.hpp"
#include "boxcar/core/migrate.hpp"
#include "boxcar/core/sql_identifier.hpp"
#include "boxcar/runtime/runtime.hpp"
#include "boxcar/testing/tcp_proxy.hpp"

namespace {

constexpr const char* kConsumer = "chaos.v1";
constexpr const char* kSource = "chaos-ingress";
constexpr const char* kTopic = "chaos.events";

std::string env(const char* name, const std::string& fallback = {}) {
  const char* value = std::getenv(name);
  return value && *value ? value : fallback;
}

std::string message_id(long n) {
  std::string digits = std::to_string(n);
  return "msg-" + std::string(digits.size() < 6 ? 6 - digits.size() : 0, '0') + digits;
}

struct ChaosDone {
  static constexpr std::string_view event_type = "chaos.done";
  static constexpr int schema_version = 1;
  static constexpr std::string_view topic = kTopic;
  std::string message_id;
};
void to_json(nlohmann::json& j, const ChaosDone& e) { j = {{"messageId", e.message_id}}; }

class ChaosHandler final : public boxcar::InboxHandler {
 public:
  ChaosHandler(boxcar::OutboxEmitter& outbox, const std::string& schema)
      : outbox_(outbox),
        table_(boxcar::quote_identifier(schema) + ".chaos_rows"),
        poison_abort_(env("CHAOS_POISON") == "abort"),
        slow_every_(std::stol(env("CHAOS_SLOW_EVERY", "0"))),
        slow_ms_(std::stol(env("CHAOS_SLOW_MS", "0"))) {}

  void handle(const nlohmann::json& payload, boxcar::HandlerContext& context) override {
    const long n = payload.at("n");
    if (payload.value("poison", false)) {
      if (poison_abort_) std::abort();  // the process dies on this message, every time
      throw boxcar::InboxPermanentError("poison message " + context.message_id);
    }
    context.tx.exec("INSERT INTO " + table_ + " (message_id, attempt, pid) VALUES ($1, $2, $3)", context.message_id,
                    context.attempt, static_cast<int>(getpid()));
    BOXCAR_FAILPOINT("worker.in_handler");
    if (slow_every_ > 0 && n % slow_every_ == 0 && context.attempt == 1)
      std::this_thread::sleep_for(std::chrono::milliseconds(slow_ms_));  // ignores the signal on purpose
    outbox_.emit(context.tx, ChaosDone{context.message_id},
                 {.scope = context.scope, .causation_id = context.message_id});
  }

 private:
  boxcar::OutboxEmitter& outbox_;
  std::string table_;
  bool poison_abort_;
  long slow_every_;
  long slow_ms_;
};

int mock_kafka() {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "0", error, sizeof error);
  rd_kafka_t* handle = rd_kafka_new(RD_KAFKA_PRODUCER, conf, error, sizeof error);
  rd_kafka_mock_cluster_t* cluster = rd_kafka_mock_cluster_new(handle, 3);
  rd_kafka_mock_topic_create(cluster, kTopic, 3, 3);
  std::cout << "BOOTSTRAP=" << rd_kafka_mock_cluster_bootstraps(cluster) << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::string command;
    words >> command;
    if (command == "down" || command == "up")
      for (int broker = 1; broker <= 3; ++broker)
        command == "down" ? rd_kafka_mock_broker_set_down(cluster, broker)
                          : rd_kafka_mock_broker_set_up(cluster, broker);
    if (command == "errors") {
      int count = 0, code = 0;
      words >> count >> code;
      for (int i = 0; i < count; ++i)
        rd_kafka_mock_push_request_errors(cluster, 0 /* Produce */, 1, static_cast<rd_kafka_resp_err_t>(code));
    }
    std::cout << "OK " << line << std::endl;
  }
  // stdin closed: the campaign is over.
  rd_kafka_mock_cluster_destroy(cluster);
  rd_kafka_destroy(handle);
  return 0;
}

int pg_proxy(const std::string& host, int port) {
  boxcar::testing::TcpProxy proxy(host, port);
  std::cout << "PORT=" << proxy.port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line == "commit-reset") proxy.drop_response_to_commit();
    std::cout << "OK " << line << " faults=" << proxy.faults() << std::endl;
  }
  return 0;
}

int init(const boxcar::RuntimeConfig& config) {
  boxcar::migrate(config.pool.url, {.schema = config.schema});
  boxcar::Runtime runtime(config);
  boxcar::Tx tx = runtime.pool()->begin();
  // No unique constraint on purpose: two committed attempts show as two rows (I2).
  tx.exec("CREATE TABLE IF NOT EXISTS " + boxcar::quote_identifier(config.schema) +
          ".chaos_rows (message_id text NOT NULL, attempt int NOT NULL, pid int NOT NULL,"
          " written_at timestamptz NOT NULL DEFAULT clock_timestamp())");
  tx.commit();
  return 0;
}

// Accepts each identity until accept() returns (accepted or duplicate), retrying the same
// identity on storage errors as a transport redelivers; prints it only then.
int ingress(const boxcar::RuntimeConfig& config, long from, long to, double rate, long poison_every) {
  boxcar::Runtime runtime(config);
  const auto start = std::chrono::steady_clock::now();
  for (long n = from; n <= to; ++n) {
    if (rate > 0)
      std::this_thread::sleep_until(start + std::chrono::microseconds(static_cast<long>((n - from) * 1e6 / rate)));
    // "key": what `scripts/chaos --ordered` orders the consumer by (32 keys, interleaved).
    nlohmann::json payload = {{"n", n}, {"key", "k" + std::to_string(n % 32)}};
    if (poison_every > 0 && n % poison_every == 0) payload["poison"] = true;
    const boxcar::AcceptRequest request{.scope = boxcar::Scope::tenant("t" + std::to_string(n % 4)),
                                        .source = kSource,
                                        .consumer = kConsumer,
                                        .message_id = message_id(n),
                                        .event_type = "chaos.work",
                                        .schema_version = 1,
                                        .payload = payload,
                                        .metadata = {}};
    for (int attempt = 1;; ++attempt) {
      try {
        runtime.inbox().accept(request);
        std::cout << request.message_id << std::endl;
        break;
      } catch (const boxcar::Error& e) {
        std::cerr << "accept " << request.message_id << " attempt " << attempt << ": " << e.code() << ": " << e.what()
                  << std::endl;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
  }
  return 0;
}

int downstream(const boxcar::RuntimeConfig& config, int idle_seconds) {
  char error[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::string group = "chaos-audit-" + std::to_string(getpid());
  rd_kafka_conf_set(conf, "bootstrap.servers", config.publisher.kafka.at("bootstrap.servers").c_str(), error,
                    sizeof error);
  rd_kafka_conf_set(conf, "group.id", group.c_str(), error, sizeof error);
  rd_kafka_conf_set(conf, "auto.offset.reset", "earliest", error, sizeof error);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", error, sizeof error);
  rd_kafka_t* consumer = rd_kafka_new(RD_KAFKA_CONSUMER, conf, error, sizeof error);
  rd_kafka_poll_set_consumer(consumer);
  rd_kafka_topic_partition_list_t* topics = rd_kafka_topic_partition_list_new(1);
  rd_kafka_topic_partition_list_add(topics, kTopic, RD_KAFKA_PARTITION_UA);
  rd_kafka_subscribe(consumer, topics);
  rd_kafka_topic_partition_list_destroy(topics);
  auto last = std::chrono::steady_clock::now();
  bool seen_any = false;
  while (std::chrono::steady_clock::now() - last < std::chrono::seconds(seen_any ? idle_seconds : 4 * idle_seconds)) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(consumer, 200);
    if (!m) continue;
    if (!m->err) {
      rd_kafka_headers_t* headers = nullptr;
      const void* value = nullptr;
      size_t size = 0;
      std::string event_id;
      if (rd_kafka_message_headers(m, &headers) == RD_KAFKA_RESP_ERR_NO_ERROR &&
          rd_kafka_header_get_last(headers, "event_id", &value, &size) == RD_KAFKA_RESP_ERR_NO_ERROR)
        event_id.assign(static_cast<const char*>(value), size);
      // (partition, offset) identifies a copy: the 2.0.2 consumer may deliver one twice.
      std::cout << (event_id.empty() ? "-" : event_id) << '\t' << m->partition << '\t' << m->offset << '\n';
      seen_any = true;
      last = std::chrono::steady_clock::now();
    }
    rd_kafka_message_destroy(m);
  }
  std::cout.flush();
  rd_kafka_consumer_close(consumer);
  rd_kafka_destroy(consumer);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  try {
    if (command == "mock-kafka") return mock_kafka();
    if (command == "pg-proxy" && argc == 4) return pg_proxy(argv[2], std::stoi(argv[3]));
    if (command == "init") return init(boxcar::load_config());
    if (command == "ingress" && argc == 6)
      return ingress(boxcar::load_config(), std::stol(argv[2]), std::stol(argv[3]), std::stod(argv[4]),
                     std::stol(argv[5]));
    if (command == "downstream") return downstream(boxcar::load_config(), argc > 2 ? std::stoi(argv[2]) : 5);
  } catch (const boxcar::Error& e) {
    std::cerr << "chaos_app: " << e.code() << ": " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "chaos_app: " << e.what() << "\n";
    return 1;
  }
  return boxcar::run_cli(argc, argv, [](boxcar::Runtime& runtime) {
    return std::vector<boxcar::HandlerRegistration>{
        {.consumer = kConsumer,
         .supports = {{"chaos.work", 1}},
         .handler = std::make_shared<ChaosHandler>(runtime.outbox(), runtime.config().schema)}};
  });
}
