// Integration tests of the BullMQ example against real servers: a throw-away redis-server,
// real bullmq (Node), the example_webhook binary on the test PostgreSQL, reached through a
// TcpProxy that can take the database away, and the Node worker (worker.mjs).
//
// What is counted: job states, attempts and results from BullMQ's own API (jobs.mjs), and
// receipts in the inbox table. Logs are only printed to explain a failure.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"
#include "redis_server.hpp"
#include "signature.hpp"
#include "boxcar/testing/tcp_proxy.hpp"
#include "boxcar/testing/testing.hpp"

using namespace std::chrono_literals;
using Json = nlohmann::json;
using bullmq_example::testing::ChildProcess;
using bullmq_example::testing::Environment;
using bullmq_example::testing::find_on_path;
using bullmq_example::testing::run;
using Ids = std::vector<std::string>;

namespace {

const std::string kDir = EXAMPLE_BULLMQ_DIR;
constexpr const char* kConsumer = "orders.projection.v1";
constexpr int kAttempts = 10;  // so "failed after one attempt" can only mean "not retried"

std::string secret() {
  const std::string raw = "tenant-a's bullmq secret 32 byte";
  return "whsec_" + webhook::base64_encode(std::vector<std::uint8_t>(raw.begin(), raw.end()));
}

int port_of(const std::string& url) {
  std::smatch m;
  REQUIRE(std::regex_search(url, m, std::regex(R"(:(\d+)/)")));
  return std::stoi(m[1]);
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof addr;
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool accepts_connections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// node on PATH; scripts/setup installs it (Debian nodejs).
std::string node() {
  static const std::string path = find_on_path("node");
  if (path.empty()) FAIL("node is not installed: run scripts/setup (Debian nodejs npm)");
  return path;
}

/// The pinned packages (package-lock.json), installed once per test process with npm ci.
void install_node_packages() {
  static std::once_flag once;
  static int status = 0;
  std::call_once(once, [] { status = run({"/bin/sh", kDir + "/install_deps.sh"}, {}, kDir).status; });
  REQUIRE(status == 0);
}

Json order_event(const std::string& id, double total, int version = 1) {
  return {{"id", id},
          {"type", "order.created"},
          {"version", version},
          {"data", {{"orderId", "o-" + id}, {"total", total}}}};
}

Ids ids_of(const std::vector<Json>& events) {
  Ids ids;
  for (const Json& e : events) ids.push_back(e.at("id"));
  return ids;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char pattern[] = "/tmp/boxcar-bullmq.XXXXXX";
    if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
    path = pattern;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

/// Redis + example_webhook (database behind a proxy) + the Node worker, on a fresh schema
/// and a fresh queue.
class BullmqFixture {
 public:
  BullmqFixture() {
    install_node_packages();
    const std::string redis_server = redis_streams::testing::RedisServer::find_executable();
    if (redis_server.empty()) FAIL("redis-server is not installed: run scripts/setup");
    redis_ = std::make_unique<redis_streams::testing::RedisServer>(redis_server);

    webhook_port_ = free_port();
    webhook_ =
        std::make_unique<ChildProcess>(std::vector<std::string>{EXAMPLE_WEBHOOK_PATH},
                                       Environment{{"BOXCAR_DATABASE_URL", proxy.route(db.url())},
                                                   {"BOXCAR_SCHEMA", db.schema()},
                                                   {"WEBHOOK_LISTEN", "127.0.0.1:" + std::to_string(webhook_port_)},
                                                   {"WEBHOOK_SECRETS", "tenant-a=" + secret()},
                                                   {"WEBHOOK_CONSUMER", kConsumer}},
                                       kDir, (dir_.path / "webhook.log").string());
    for (int i = 0; !accepts_connections(webhook_port_); ++i) {
      INFO(logs());
      REQUIRE(webhook_->running());
      REQUIRE(i < 300);  // 15 s
      std::this_thread::sleep_for(50ms);
    }
    start_worker();
  }

  void start_worker() {
    worker_ = std::make_unique<ChildProcess>(std::vector<std::string>{node(), "worker.mjs"}, environment(), kDir,
                                             (dir_.path / "worker.log").string());
  }
  int stop_worker() { return worker_->stop(); }

  /// What the example's scripts read: the queue, the ingress, the retry policy.
  Environment environment() const {
    return {{"REDIS_URL", redis_->url()},
            {"BULLMQ_QUEUE", "orders"},
            {"WEBHOOK_URL", "http://127.0.0.1:" + std::to_string(webhook_port_) + "/webhooks/orders/tenant-a"},
            {"WEBHOOK_SECRET", secret()},
            {"BULLMQ_ATTEMPTS", std::to_string(kAttempts)},
            {"BULLMQ_BACKOFF_MS", "200"}};
  }

  /// node producer.mjs with one event per line.
  void enqueue(const std::vector<Json>& events) {
    const auto file = dir_.path / ("events-" + std::to_string(++files_) + ".jsonl");
    std::ofstream out(file);
    for (const Json& e : events) out << e.dump() << "\n";
    out.close();
    const auto r = run({node(), "producer.mjs", file.string()}, environment(), kDir);
    INFO(r.out);
    REQUIRE(r.status == 0);
  }

  /// node jobs.mjs <command> <ids>: the JSON it prints.
  Json jobs(const std::string& command, const Ids& ids = {}) {
    std::vector<std::string> argv = {node(), "jobs.mjs", command};
    argv.insert(argv.end(), ids.begin(), ids.end());
    const auto r = run(argv, environment(), kDir);
    INFO(r.out);
    REQUIRE(r.status == 0);
    return Json::parse(r.out);
  }

  /// Polls the jobs until `done` holds for each one (at most `limit`, a liveness bound).
  Json wait_for(const Ids& ids, const std::function<bool(const Json&)>& done, std::chrono::seconds limit = 60s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      Json state = jobs("show", ids);
      bool all = true;
      for (const std::string& id : ids) all = all && done(state.at(id));
      if (all) return state;
      if (std::chrono::steady_clock::now() > deadline) {
        INFO(state.dump(1) << "\n" << logs());
        FAIL("the jobs did not get there in time");
      }
      std::this_thread::sleep_for(200ms);
    }
  }
  Json wait_finished(const Ids& ids) {
    return wait_for(ids, [](const Json& job) { return job["state"] == "completed" || job["state"] == "failed"; });
  }

  std::int64_t receipts(const std::string& where = "TRUE") const {
    return db.count("SELECT count(*) FROM {schema}.inbox_receipts WHERE " + where);
  }

  std::string logs() const {
    return "--- webhook.log\n" + read_file(dir_.path / "webhook.log") + "--- worker.log\n" +
           read_file(dir_.path / "worker.log");
  }

  boxcar::testing::TestSchema db;
  boxcar::testing::TcpProxy proxy{"127.0.0.1", port_of(db.url())};

 private:
  TempDir dir_;
  std::unique_ptr<redis_streams::testing::RedisServer> redis_;
  int webhook_port_ = 0;
  int files_ = 0;
  // Last, so they stop first: the worker before the webhook, the webhook before Redis.
  std::unique_ptr<ChildProcess> webhook_;
  std::unique_ptr<ChildProcess> worker_;
};

}  // namespace

TEST_CASE("a job completes once the webhook ingress accepted it, with one receipt per job under the key's tenant") {
  BullmqFixture f;
  std::vector<Json> events;
  for (int i = 0; i < 8; ++i) events.push_back(order_event("evt-happy-" + std::to_string(i), 10 + i));
  f.enqueue(events);

  const Json jobs = f.wait_finished(ids_of(events));
  for (const Json& e : events) {
    const Json& job = jobs.at(e.at("id").get<std::string>());
    INFO(job.dump());
    CHECK(job["state"] == "completed");
    CHECK(job["attemptsMade"] == 1);
    CHECK(job["result"]["result"] == "accepted");
    // The job's result is the receipt the ingress answered with, and that receipt exists.
    CHECK(f.receipts("id = " + job["result"]["receipt"]["id"].dump() + " AND message_id = '" +
                     e.at("id").get<std::string>() + "'") == 1);
  }
  CHECK(f.receipts() == 8);
  CHECK(f.receipts("scope_id = 'tenant-a' AND source = 'webhook:orders' AND consumer = 'orders.projection.v1' AND "
                   "status = 'PENDING'") == 8);

  // SIGTERM: the worker closes (waiting for jobs in flight) and exits 0.
  CHECK(f.stop_worker() == 0);
}

TEST_CASE("a database outage loses no job: every job is retried with backoff until its receipt is durable") {
  BullmqFixture f;
  // Before the outage: the webhook server's pool holds live connections, which the outage cuts.
  f.enqueue({order_event("evt-before", 1)});
  REQUIRE(f.wait_finished({"evt-before"}).at("evt-before")["state"] == "completed");

  f.proxy.set_down(true);  // the webhook server's database is unreachable: it answers 503
  std::vector<Json> events;
  for (int i = 0; i < 12; ++i) events.push_back(order_event("evt-outage-" + std::to_string(i), i));
  f.enqueue(events);
  const Ids ids = ids_of(events);

  // Each job has failed at least twice and none completed: 503 is not an acknowledgement.
  const Json during = f.wait_for(ids, [](const Json& job) { return job["attemptsMade"].get<int>() >= 2; });
  for (const std::string& id : ids) {
    const Json& job = during.at(id);
    INFO(job.dump());
    CHECK(job["state"] != "completed");
    CHECK(job["state"] != "failed");
    CHECK(job["failedReason"].get<std::string>().find("ingress answered 503") != std::string::npos);
  }
  CHECK(f.receipts() == 1);

  f.proxy.set_down(false);
  const Json after = f.wait_finished(ids);
  for (const std::string& id : ids) {
    const Json& job = after.at(id);
    INFO(job.dump());
    CHECK(job["state"] == "completed");
    CHECK(job["attemptsMade"].get<int>() >= 3);
    CHECK(job["result"]["result"] == "accepted");
    CHECK(f.receipts("message_id = '" + id + "'") == 1);
  }
  CHECK(f.receipts() == 13);
}

TEST_CASE("a replay of the same job ids answers duplicate, completes, and leaves the receipts untouched") {
  BullmqFixture f;
  std::vector<Json> events;
  for (int i = 0; i < 6; ++i) events.push_back(order_event("evt-replay-" + std::to_string(i), 5 * i));
  const Ids ids = ids_of(events);
  f.enqueue(events);
  const Json first = f.wait_finished(ids);
  for (const std::string& id : ids) CHECK(first.at(id)["result"]["result"] == "accepted");
  REQUIRE(f.receipts() == 6);
  f.db.query("UPDATE {schema}.inbox_receipts SET attempts = 2, status = 'RETRYABLE'");  // mid-retry in Boxcar

  // While BullMQ still holds the jobs, it ignores an add under the same ids.
  f.enqueue(events);
  const Json ignored = f.jobs("show", ids);
  for (const std::string& id : ids) CHECK(ignored.at(id)["result"]["result"] == "accepted");

  // Once they are removed (removeOnComplete, or by hand), a redelivery makes new jobs:
  // Boxcar answers duplicate, the jobs complete, and the receipts keep their state.
  f.jobs("remove", ids);
  f.enqueue(events);
  const Json replayed = f.wait_finished(ids);
  for (const std::string& id : ids) {
    const Json& job = replayed.at(id);
    INFO(job.dump());
    CHECK(job["state"] == "completed");
    CHECK(job["attemptsMade"] == 1);
    CHECK(job["result"]["result"] == "duplicate");
  }
  CHECK(f.receipts() == 6);
  CHECK(f.receipts("attempts = 2 AND status = 'RETRYABLE'") == 6);
}

TEST_CASE("a conflicting payload under a reused id and an invalid event fail at once, without a retry") {
  BullmqFixture f;
  f.enqueue({order_event("evt-reused", 10)});
  REQUIRE(f.wait_finished({"evt-reused"}).at("evt-reused")["state"] == "completed");

  f.jobs("remove", {"evt-reused"});
  f.enqueue({order_event("evt-reused", 11), order_event("evt-invalid", 1, 0)});
  const Json jobs = f.wait_finished({"evt-reused", "evt-invalid"});
  INFO(jobs.dump(1));
  // attempts is 10, so one attempt made means UnrecoverableError, not an exhausted budget.
  CHECK(jobs["evt-reused"]["state"] == "failed");
  CHECK(jobs["evt-reused"]["attemptsMade"] == 1);
  CHECK(jobs["evt-reused"]["failedReason"].get<std::string>().find("409") != std::string::npos);
  CHECK(jobs["evt-reused"]["failedReason"].get<std::string>().find("IDENTITY_CONFLICT") != std::string::npos);
  CHECK(jobs["evt-invalid"]["state"] == "failed");
  CHECK(jobs["evt-invalid"]["attemptsMade"] == 1);
  CHECK(jobs["evt-invalid"]["failedReason"].get<std::string>().find("400") != std::string::npos);

  // The stored record is the first one; the invalid event was never stored.
  CHECK(f.receipts() == 1);
  CHECK(f.receipts("message_id = 'evt-reused' AND payload->>'total' = '10'") == 1);
  // The failed set is the dead-letter list an operator works from.
  const Json failed = f.jobs("failed");
  CHECK(failed.size() == 2);
  CHECK(failed.contains("evt-reused"));
  CHECK(failed.contains("evt-invalid"));
}

TEST_CASE("a job whose id is not its event id fails instead of reaching Boxcar under BullMQ's counter id") {
  BullmqFixture f;
  // A producer that forgot jobId: BullMQ numbers the job itself.
  const std::string script =
      "import { Queue } from 'bullmq';"
      "import { connection, queueName } from './config.mjs';"
      "const queue = new Queue(queueName, { connection: connection() });"
      "const job = await queue.add('order.created', " +
      order_event("evt-no-job-id", 1).dump() + ", { attempts: " + std::to_string(kAttempts) +
      " });"
      "console.log(job.id); await queue.close();";
  const auto r = run({node(), "--input-type=module", "-e", script}, f.environment(), kDir);
  REQUIRE(r.status == 0);
  const std::string job_id = r.out.substr(0, r.out.find('\n'));
  REQUIRE(job_id != "evt-no-job-id");

  const Json job = f.wait_finished({job_id}).at(job_id);
  INFO(job.dump());
  CHECK(job["state"] == "failed");
  CHECK(job["attemptsMade"] == 1);
  CHECK(job["failedReason"].get<std::string>().find("jobId must be the event id") != std::string::npos);
  CHECK(f.receipts() == 0);
}

TEST_CASE("the worker signs like the Standard Webhooks reference libraries") {
  install_node_packages();
  // The test vector published with the Standard Webhooks reference libraries (also checked
  // against the C++ verifier in examples/webhook/webhook_test.cpp).
  const std::string script =
      "import { decodeSecret, sign } from './signature.mjs';"
      "console.log(sign(decodeSecret('whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw'), 'msg_p5jXN8AQM9LWM0D4loKWxJek',"
      " '1614265330', '{\"test\": 2432232314}'));"
      "for (const bad of ['MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'whsec_', undefined]) {"
      "  try { decodeSecret(bad); console.log('accepted'); } catch (e) { console.log(e.message); }"
      "}";
  const auto r = run({node(), "--input-type=module", "-e", script}, {}, kDir);
  REQUIRE(r.status == 0);
  CHECK(r.out ==
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=\n"
        "WEBHOOK_SECRET: expected whsec_<base64>\n"
        "WEBHOOK_SECRET: the key after whsec_ is empty or not base64\n"
        "WEBHOOK_SECRET: expected whsec_<base64>\n");
}
