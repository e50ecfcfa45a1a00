// Integration tests of the RabbitMQ ingress example against a real, throw-away RabbitMQ
// node and the test PostgreSQL: what is acknowledged, dead-lettered and requeued is
// checked by counting receipts and queue depths, not by reading logs alone.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "ingress.hpp"
#include "rabbitmq_node.hpp"
#include "boxcar/testing/eventually.hpp"
#include "boxcar/testing/testing.hpp"

extern char** environ;

namespace {

using boxcar::examples::AmqpSession;
using boxcar::examples::IngressOptions;
using boxcar::examples::OutgoingMessage;
using boxcar::examples::testing::BrokerUser;
using boxcar::examples::testing::RabbitMqNode;
using boxcar::testing::eventually_equals;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// One broker user per tenant: the user a publisher logs in as is its tenant.
const BrokerUser kTenant7{.name = "tenant-7", .password = "tenant-7-secret"};
const BrokerUser kTenant8{.name = "tenant-8", .password = "tenant-8-secret"};

/// ctest's SKIP_RETURN_CODE for this suite (CMakeLists.txt).
constexpr int kSkipped = 77;

/// The node for this test case; when RabbitMQ is not installed the process ends with
/// kSkipped, which ctest reports as skipped: a test that could not run never counts as
/// passed.
std::unique_ptr<RabbitMqNode> start_node_or_skip() {
  if (auto reason = RabbitMqNode::unavailable_reason()) {
    std::cout << "SKIPPED: cannot start a RabbitMQ node here: " << *reason << std::endl;
    std::exit(kSkipped);
  }
  return std::make_unique<RabbitMqNode>(std::vector<BrokerUser>{kTenant7, kTenant8});
}

/// Published by `tenant`'s broker user, which the user_id property names.
OutgoingMessage order_created(const std::string& id, const std::string& body, const BrokerUser& tenant = kTenant7) {
  return {.message_id = id,
          .type = "order.created",
          .user_id = tenant.name,
          .headers = {{"schema-version", std::int64_t{1}}},
          .body = body};
}

std::multiset<std::string> drain_message_ids(AmqpSession& session, const std::string& queue,
                                             std::map<std::string, std::string>* bodies = nullptr) {
  std::multiset<std::string> ids;
  while (auto message = session.get(queue)) {
    ids.insert(message->message_id);
    if (bodies) (*bodies)[message->message_id] = message->body;
  }
  return ids;
}

/// The example binary as a child process with extra environment, output to `log`.
class IngressProcess {
 public:
  IngressProcess(const std::map<std::string, std::string>& env_overrides, std::vector<std::string> args,
                 std::string log)
      : log_(std::move(log)) {
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      if (!env_overrides.count(entry.substr(0, entry.find('=')))) env.push_back(entry);
    }
    for (const auto& [key, value] : env_overrides) env.push_back(key + "=" + value);
    args.insert(args.begin(), BOXCAR_RABBITMQ_INGRESS_PATH);
    std::vector<char*> envp, argv;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out >= 0) {
        ::dup2(out, STDOUT_FILENO);
        ::dup2(out, STDERR_FILENO);
      }
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(127);
    }
  }
  ~IngressProcess() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    std::filesystem::remove(log_);
  }
  IngressProcess(const IngressProcess&) = delete;
  IngressProcess& operator=(const IngressProcess&) = delete;

  void signal(int sig) const { ::kill(pid_, sig); }
  /// The exit status, or nullopt when it is still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(50ms);
    }
    return std::nullopt;
  }
  std::string output() const {
    std::ifstream in(log_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
};

std::string temp_log(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string(name) + "-" + std::to_string(::getpid()) + ".log"))
      .string();
}

}  // namespace

TEST_CASE("the ingress acks accepted and duplicate deliveries and dead-letters conflicts and invalid ones") {
  const auto node = start_node_or_skip();
  boxcar::testing::TestSchema db;
  const IngressOptions options{.amqp = node->amqp()};
  AmqpSession admin(node->amqp());
  boxcar::examples::declare_topology(admin, options);
  AmqpSession producer(node->amqp_as(kTenant7));

  // A valid event, its redelivery (same id, keys in another order, other trace header:
  // the same content), the id reused with other content, and three that cannot be
  // accepted: a body that is not JSON, no user_id (no tenant), a non-numeric schema version.
  producer.publish("orders", order_created("evt-1", R"({"orderId":"o-1","total":10})"));
  OutgoingMessage redelivery = order_created("evt-1", R"({"total":10,"orderId":"o-1"})");
  redelivery.headers["traceparent"] = std::string("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  producer.publish("orders", redelivery);
  producer.publish("orders", order_created("evt-1", R"({"orderId":"o-1","total":11})"));
  producer.publish("orders", order_created("evt-2", "{not json"));
  OutgoingMessage no_tenant = order_created("evt-3", R"({"orderId":"o-3"})");
  no_tenant.user_id.reset();
  producer.publish("orders", no_tenant);
  OutgoingMessage bad_version = order_created("evt-5", R"({"orderId":"o-5"})");
  bad_version.headers["schema-version"] = std::string("one");
  producer.publish("orders", bad_version);
  // Identity and type from headers, schema version as text: accepted.
  producer.publish("orders", {.user_id = kTenant7.name,
                              .headers = {{"message-id", std::string("evt-4")},
                                          {"type", std::string("order.created")},
                                          {"schema-version", std::string("1")}},
                              .body = R"({"orderId":"o-4"})"});
  const std::function<std::uint32_t()> orders_depth = [&] { return admin.message_count("orders"); };
  const std::function<std::uint32_t()> dead_depth = [&] { return admin.message_count("orders.dead-letter"); };
  REQUIRE(eventually_equals(orders_depth, 7u) == 7u);

  IngressProcess ingress({{"BOXCAR_DATABASE_URL", db.url()},
                          {"BOXCAR_SCHEMA", db.schema()},
                          {"RABBITMQ_HOST", "127.0.0.1"},
                          {"RABBITMQ_PORT", std::to_string(node->amqp_port())}},
                         {"--until-idle", "1.5"}, temp_log("example-rabbitmq-ingress"));
  const std::optional<int> status = ingress.wait(30s);
  const std::string output = ingress.output();
  INFO("ingress output:\n" << output);
  REQUIRE(status == 0);

  // Two identities retained, once each; the conflict left the first record untouched.
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 2);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id IN ('evt-1', 'evt-4') "
                 "AND consumer = 'orders.projection.v1' AND scope_id = 'tenant-7'") == 2);
  CHECK(db.count("SELECT (payload->>'total')::int FROM {schema}.inbox_receipts WHERE message_id = 'evt-1'") == 10);

  // Every delivery was settled: nothing waits in the main queue, and exactly the
  // conflict and the three invalid ones went to the dead-letter queue.
  CHECK(eventually_equals(orders_depth, 0u) == 0u);
  REQUIRE(eventually_equals(dead_depth, 4u) == 4u);
  std::map<std::string, std::string> bodies;
  CHECK(drain_message_ids(admin, "orders.dead-letter", &bodies) ==
        std::multiset<std::string>{"evt-1", "evt-2", "evt-3", "evt-5"});
  CHECK(bodies["evt-1"] == R"({"orderId":"o-1","total":11})");

  // The reason of each dead letter is in the log.
  CHECK(output.find("IDENTITY_CONFLICT") != std::string::npos);
  CHECK(output.find("BODY_NOT_JSON") != std::string::npos);
  CHECK(output.find("AMQP_USER_ID_MISSING") != std::string::npos);
  CHECK(output.find("AMQP_HEADER_INVALID") != std::string::npos);
  CHECK(output.find("accepted=2 duplicates=1 dead_lettered=4 requeued=0") != std::string::npos);
}

TEST_CASE("the ingress stops cleanly on SIGTERM and a later run deduplicates a redelivery") {
  const auto node = start_node_or_skip();
  boxcar::testing::TestSchema db;
  const IngressOptions options{.amqp = node->amqp()};
  AmqpSession admin(node->amqp());
  boxcar::examples::declare_topology(admin, options);
  AmqpSession producer(node->amqp_as(kTenant7));
  const std::map<std::string, std::string> env{{"BOXCAR_DATABASE_URL", db.url()},
                                               {"BOXCAR_SCHEMA", db.schema()},
                                               {"RABBITMQ_HOST", "127.0.0.1"},
                                               {"RABBITMQ_PORT", std::to_string(node->amqp_port())}};
  const std::function<std::uint32_t()> orders_depth = [&] { return admin.message_count("orders"); };
  const std::function<std::int64_t()> receipts = [&] {
    return db.count("SELECT count(*) FROM {schema}.inbox_receipts");
  };

  {
    IngressProcess ingress(env, {}, temp_log("example-rabbitmq-sigterm"));
    producer.publish("orders", order_created("evt-1", R"({"orderId":"o-1"})"));
    REQUIRE(eventually_equals(receipts, std::int64_t{1}, 20s) == 1);
    ingress.signal(SIGTERM);
    const std::optional<int> status = ingress.wait(10s);
    INFO("ingress output:\n" << ingress.output());
    CHECK(status == 0);
  }
  // The producer's retry of the same event after the restart is acked as a duplicate.
  producer.publish("orders", order_created("evt-1", R"({"orderId":"o-1"})"));
  IngressProcess again(env, {"--until-idle", "1"}, temp_log("example-rabbitmq-again"));
  const std::optional<int> status = again.wait(30s);
  INFO("ingress output:\n" << again.output());
  REQUIRE(status == 0);
  CHECK(receipts() == 1);
  CHECK(eventually_equals(orders_depth, 0u) == 0u);
  CHECK(admin.message_count("orders.dead-letter") == 0);
  CHECK(again.output().find("accepted=0 duplicates=1") != std::string::npos);
}

TEST_CASE("a storage failure requeues deliveries instead of acknowledging or dead-lettering them") {
  const auto node = start_node_or_skip();
  IngressOptions options{.amqp = node->amqp()};
  options.storage_backoff = {.base = 20ms, .cap = 100ms};
  AmqpSession admin(node->amqp());
  boxcar::examples::declare_topology(admin, options);
  AmqpSession producer(node->amqp_as(kTenant7));
  for (const char* id : {"evt-1", "evt-2", "evt-3"}) {
    producer.publish("orders", order_created(id, R"({"orderId":"o-1"})"));
  }
  const std::function<std::uint32_t()> orders_depth = [&] { return admin.message_count("orders"); };
  REQUIRE(eventually_equals(orders_depth, 3u) == 3u);

  // A database nobody listens on: every accept() is an InboxStorageError.
  auto dead_pool = boxcar::ConnectionPool::create(
      {.url = "postgresql://boxcar@127.0.0.1:1/postgres", .size = 1, .acquire_timeout = 500ms});
  boxcar::Inbox dead_inbox(dead_pool, {.schema = "boxcar", .consumers = {options.consumer}});
  std::atomic<bool> stop{false};
  boxcar::examples::IngressStats stats;
  std::thread consumer([&] { stats = boxcar::examples::run_ingress(dead_inbox, options, stop); });
  std::this_thread::sleep_for(1500ms);
  stop = true;
  consumer.join();

  CHECK(stats.requeued >= 3);
  CHECK(stats.accepted + stats.duplicates + stats.rejected == 0);
  // Nothing was lost or dead-lettered: all three are back in the queue.
  CHECK(eventually_equals(orders_depth, 3u) == 3u);
  CHECK(admin.message_count("orders.dead-letter") == 0);

  // Once the database is back, the same deliveries are accepted.
  boxcar::testing::TestSchema db;
  boxcar::Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {options.consumer}});
  options.until_idle = 1s;
  stop = false;
  const auto recovered = boxcar::examples::run_ingress(inbox, options, stop);
  CHECK(recovered.accepted == 3);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 3);
  CHECK(eventually_equals(orders_depth, 0u) == 0u);
}

TEST_CASE(
    "the tenant is the broker-validated publishing user: a forged user_id is refused by the broker, "
    "and a missing user_id or a contradicting tenant header is dead-lettered") {
  const auto node = start_node_or_skip();
  boxcar::testing::TestSchema db;
  IngressOptions options{.amqp = node->amqp()};
  options.until_idle = 1500ms;
  AmqpSession admin(node->amqp());
  boxcar::examples::declare_topology(admin, options);

  AmqpSession tenant7(node->amqp_as(kTenant7));
  AmqpSession tenant8(node->amqp_as(kTenant8));
  tenant7.publish("orders", order_created("evt-1", R"({"orderId":"o-1"})", kTenant7));
  tenant8.publish("orders", order_created("evt-1", R"({"orderId":"o-1"})", kTenant8));  // another tenant's evt-1
  OutgoingMessage contradicting = order_created("evt-2", R"({"orderId":"o-2"})", kTenant8);
  contradicting.headers["tenant"] = kTenant7.name;
  tenant8.publish("orders", contradicting);
  OutgoingMessage anonymous = order_created("evt-3", R"({"orderId":"o-3"})", kTenant8);
  anonymous.user_id.reset();
  tenant8.publish("orders", anonymous);

  // tenant-8 claiming to be tenant-7: the broker closes the channel instead of routing it.
  {
    AmqpSession forger(node->amqp_as(kTenant8));
    forger.publish("orders", order_created("evt-4", R"({"orderId":"o-4"})", kTenant7));
    int reply_code = 0;
    std::string refusal;
    try {
      forger.message_count("orders");  // the next synchronous call sees the channel.close
    } catch (const boxcar::examples::AmqpError& e) {
      reply_code = e.reply_code();
      refusal = e.what();
    }
    INFO(refusal);
    CHECK(reply_code == 406);  // PRECONDITION_FAILED
  }
  const std::function<std::uint32_t()> orders_depth = [&] { return admin.message_count("orders"); };
  REQUIRE(eventually_equals(orders_depth, 4u) == 4u);

  boxcar::Inbox inbox(db.pool(), {.schema = db.schema(), .consumers = {options.consumer}, .notify = false});
  std::atomic<bool> stop{false};
  const auto stats = boxcar::examples::run_ingress(inbox, options, stop);
  CHECK(stats.accepted == 2);
  CHECK(stats.rejected == 2);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts") == 2);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'evt-1' "
                 "AND scope_id IN ('tenant-7', 'tenant-8')") == 2);
  CHECK(db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE message_id = 'evt-4'") == 0);
  REQUIRE(eventually_equals(std::function<std::uint32_t()>([&] { return admin.message_count("orders.dead-letter"); }),
                            2u) == 2u);
  CHECK(drain_message_ids(admin, "orders.dead-letter") == std::multiset<std::string>{"evt-2", "evt-3"});
}
