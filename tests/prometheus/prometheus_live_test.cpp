// A real Prometheus (Debian's package) scraping a running pipeline: an ingress feeding
// messages, a worker projecting them and emitting events, a publisher sending them to
// librdkafka's mock cluster, all against the test PostgreSQL. One Prometheus and one
// pipeline serve every test case of this binary (ctest runs the binary once, label ops),
// so the whole file costs one start of each.
#include <signal.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <memory>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <catch2/catch.hpp>

#include "boxcar/testing/mock_kafka.hpp"
#include "child_process.hpp"
#include "dashboard_queries.hpp"
#include "http_get.hpp"
#include "prometheus_server.hpp"
#include "test_database.hpp"

namespace {

using namespace std::chrono_literals;
using boxcar::testing::ChildProcess;
using boxcar::testing::MockKafka;
using boxcar::testing::PrometheusServer;
using boxcar::testing::TestDatabase;
using nlohmann::json;

const std::filesystem::path kSource = BOXCAR_SOURCE_DIR;
const std::filesystem::path kAlertRules = kSource / "docs" / "prometheus" / "boxcar-alerts.yml";
const std::filesystem::path kDashboard = kSource / "docs" / "grafana" / "boxcar-dashboard.json";
// Grafana's $__rate_interval for a 1 s scrape is 4 s; a little more keeps two samples in
// the window when the machine is busy.
const std::string kRateInterval = "10s";

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

bool serving(int port) {
  try {
    return boxcar::testing::http_get(port, "/healthz").status == 200;
  } catch (const std::exception&) {
    return false;
  }
}

// The running pipeline and the Prometheus that scrapes it, started once.
class Pipeline {
 public:
  Pipeline() {
    kafka_.create_topic("orders.projected", 2);
    db_.query("CREATE TABLE {schema}.app_rows (message_id text NOT NULL, attempt int NOT NULL)");
    const std::vector<std::string> environment = {"BOXCAR_DATABASE_URL=" + db_.url(),
                                                  "BOXCAR_SCHEMA=" + db_.schema(),
                                                  "BOXCAR_CONSUMERS=orders.v1",
                                                  "BOXCAR_WORKER_POLL_INTERVAL_MS=200",
                                                  "BOXCAR_PUBLISHER_POLL_INTERVAL_MS=200",
                                                  "BOXCAR_METRICS_BACKLOG_INTERVAL_MS=500",
                                                  "BOXCAR_KAFKA_BOOTSTRAP_SERVERS=" + kafka_.bootstrap_servers(),
                                                  "BOXCAR_LOG_LEVEL=warn"};
    const auto start = [&](const std::string& role, const std::string& program, std::vector<std::string> args) {
      const int port = boxcar::testing::free_port_below_ephemeral();
      auto env = environment;
      env.push_back("BOXCAR_HTTP_LISTEN=127.0.0.1:" + std::to_string(port));
      processes_.push_back(std::make_unique<ChildProcess>(program, args, env));
      targets_.push_back({role, port});
    };
    start("ingress", BOXCAR_TEST_APP_PATH, {"feed", "25"});  // 25 accepted messages a second
    start("worker", BOXCAR_TEST_APP_PATH, {"worker"});
    start("publisher", BOXCAR_CLI_PATH, {"publisher"});  // the generic binary: no application code
    for (std::size_t i = 0; i < targets_.size(); ++i) {
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (!serving(targets_[i].port)) {
        if (processes_[i]->wait(100ms) || std::chrono::steady_clock::now() > deadline)
          throw std::runtime_error("the " + targets_[i].role + " did not serve /healthz:\n" + processes_[i]->output());
      }
    }
    prometheus_ = std::make_unique<PrometheusServer>(targets_, std::vector<std::filesystem::path>{kAlertRules});
  }
  ~Pipeline() {
    prometheus_.reset();
    for (auto& process : processes_) process->signal(SIGTERM);
    for (auto& process : processes_) process->wait(15s);
  }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  const PrometheusServer& prometheus() const { return *prometheus_; }
  std::string logs() const {
    std::string text;
    for (std::size_t i = 0; i < processes_.size(); ++i)
      text += "--- " + targets_[i].role + "\n" + processes_[i]->output();
    return text + "--- prometheus\n" + prometheus_->output();
  }

 private:
  TestDatabase db_;
  MockKafka kafka_;
  std::vector<boxcar::testing::ScrapeTarget> targets_;
  std::vector<std::unique_ptr<ChildProcess>> processes_;
  std::unique_ptr<PrometheusServer> prometheus_;
};

// Started by the first test case that needs it; a start that failed fails every later
// test case at once instead of being tried again.
Pipeline& pipeline() {
  static std::string start_failure;
  if (!start_failure.empty()) FAIL("the pipeline did not start: " << start_failure);
  try {
    static Pipeline running;
    return running;
  } catch (const std::exception& e) {
    start_failure = e.what();
    throw;
  }
}

// The samples of an instant query's vector result (empty on an error).
json samples(const json& answer) {
  if (answer.value("status", "") != "success") return json::array();
  return answer.at("data").at("result");
}

// Asks `promql` until its samples satisfy `done` (default: there is one) or `limit`
// passed; the last answer's samples.
json samples_eventually(const std::string& promql, const std::function<bool(const json&)>& done = {},
                        std::chrono::milliseconds limit = 30s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    const json result = samples(pipeline().prometheus().query(promql));
    if ((done ? done(result) : !result.empty()) || std::chrono::steady_clock::now() > deadline) return result;
    std::this_thread::sleep_for(250ms);
  }
}

double value_of(const json& sample) { return std::stod(sample.at("value").at(1).get<std::string>()); }

std::set<std::string> label_values(const json& result, const std::string& label) {
  std::set<std::string> values;
  for (const auto& sample : result) values.insert(sample.at("metric").value(label, ""));
  return values;
}

const std::set<std::string> kRoles = {"ingress", "worker", "publisher"};

// Asks `promql` until it has a series from each of the three processes.
json from_every_process(const std::string& promql) {
  return samples_eventually(promql, [](const json& result) { return label_values(result, "role") == kRoles; });
}

// Waits until Prometheus scrapes all three processes and events reach Kafka, so that
// every labelled series (created at its first observation) exists.
void wait_for_traffic() {
  from_every_process("up{job=\"boxcar\"} == 1");
  samples_eventually("sum(rate(boxcar_publisher_events_total{outcome=\"delivered\"}[" + kRateInterval + "])) > 0");
}

// Why `promql` fails against the running pipeline, "" when it does not: it must parse,
// name only metrics some process exports and, with `needs_series`, return a series.
std::string problem_with(const std::string& promql, bool needs_series) {
  const auto& prometheus = pipeline().prometheus();
  const json answer = prometheus.query(promql);
  if (answer.value("status", "") != "success")
    return "does not run: " + answer.value("errorType", "") + ": " + answer.value("error", "");
  const auto exported = prometheus.metric_names();
  std::string missing;
  for (const auto& name : boxcar::testing::metric_names_in(promql))
    if (std::find(exported.begin(), exported.end(), name) == exported.end()) missing += " " + name;
  if (!missing.empty()) return "names metrics no process exports:" + missing;
  if (needs_series && answer.at("data").at("result").empty()) return "returns no series";
  return "";
}

// Grafana's `label_values(metric, label)` as PromQL that returns one series per value.
std::string variable_promql(const std::string& query) {
  static const std::regex label_values(R"(^\s*label_values\(\s*([^,]+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$)");
  std::smatch m;
  if (!std::regex_match(query, m, label_values)) return query;
  return "count by (" + m[2].str() + ") (" + m[1].str() + ")";
}

}  // namespace

TEST_CASE("Prometheus scrapes the ingress, the worker and the publisher of a running pipeline") {
  const json up = from_every_process("up{job=\"boxcar\"} == 1");
  INFO(pipeline().logs());
  CHECK(label_values(up, "role") == kRoles);
}

TEST_CASE("the backlog gauges have series from every process") {
  for (const char* gauge :
       {"boxcar_inbox_receipts{consumer=\"orders.v1\", status=\"PENDING\"}",
        "boxcar_inbox_oldest_due_age_seconds{consumer=\"orders.v1\"}", "boxcar_outbox_events{status=\"PENDING\"}",
        "boxcar_outbox_oldest_unpublished_age_seconds"}) {
    INFO(gauge);
    // Each process exports the fleet's figures, whichever of them computed them.
    CHECK(label_values(from_every_process(gauge), "role") == kRoles);
  }
}

TEST_CASE("the accepted, processed and published counters rise while traffic flows") {
  const std::string window = "[" + kRateInterval + "]";
  for (const std::string& rate :
       {"sum(rate(boxcar_inbox_accept_total{role=\"ingress\", result=\"accepted\"}" + window + ")) > 0",
        "sum(rate(boxcar_inbox_processed_total{role=\"worker\", outcome=\"completed\"}" + window + ")) > 0",
        "sum(rate(boxcar_outbox_emitted_total{role=\"worker\"}" + window + ")) > 0",
        "sum(rate(boxcar_publisher_events_total{role=\"publisher\", outcome=\"delivered\"}" + window + ")) > 0"}) {
    INFO(rate);
    const json result = samples_eventually(rate);
    REQUIRE(result.size() == 1);
    CHECK(value_of(result[0]) > 0);
  }
}

TEST_CASE("the commit-to-ack latency quantile of the publisher is a number") {
  // emit_to_delivered: the outbox row's commit (created_at) to its delivery report.
  const std::string quantile =
      "histogram_quantile(0.99, sum by (le) (rate(boxcar_publisher_emit_to_delivered_seconds_bucket{role=\"publisher\"}[" +
      kRateInterval + "]))) >= 0";  // NaN (no observation in the window) fails every comparison
  const json result = samples_eventually(quantile);
  REQUIRE(result.size() == 1);
  const double seconds = value_of(result[0]);
  CHECK(std::isfinite(seconds));
  CHECK(seconds <= 300);  // the histogram's largest bucket
}

TEST_CASE("every PromQL expression of the Grafana dashboard returns series for the running pipeline") {
  const auto queries = boxcar::testing::dashboard_queries(json::parse(read_file(kDashboard)));
  REQUIRE(queries.size() >= 20);
  wait_for_traffic();
  std::string failures;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  for (const auto& query : queries) {
    const std::string promql = variable_promql(boxcar::testing::instantiate(query.expr, kRateInterval));
    std::string problem = problem_with(promql, true);
    // A rate needs two scrapes inside its window: ask again for a while before failing.
    while (!problem.empty() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(500ms);
      problem = problem_with(promql, true);
    }
    if (!problem.empty()) failures += query.where + ": " + query.expr + "\n  " + problem + "\n";
  }
  INFO(failures);
  CHECK(failures.empty());
}

TEST_CASE("the dashboard check reports a metric that does not exist and an expression that does not parse") {
  from_every_process("up{job=\"boxcar\"} == 1");
  CHECK_THAT(problem_with("max by (consumer) (boxcar_inbox_reciepts{consumer=~\".*\"})", true),
             Catch::Contains("names metrics no process exports: boxcar_inbox_reciepts"));
  CHECK_THAT(problem_with("sum by (consumer (boxcar_inbox_receipts)", true), Catch::Contains("does not run"));
  CHECK(problem_with("max by (consumer) (boxcar_inbox_receipts)", true).empty());
}

TEST_CASE("Prometheus evaluates every shipped alert rule without error and a healthy pipeline fires none") {
  std::size_t alerts_in_file = 0;
  std::istringstream lines(read_file(kAlertRules));
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, std::regex(R"(^\s*- alert:)"))) ++alerts_in_file;
  REQUIRE(alerts_in_file >= 5);
  wait_for_traffic();

  // Every rule evaluated at least once since the start (health leaves "unknown").
  json rules;
  const auto deadline = std::chrono::steady_clock::now() + 20s;
  while (true) {
    rules = json::array();
    const json answer = pipeline().prometheus().api("/api/v1/rules");
    for (const auto& group : answer.at("data").at("groups"))
      for (const auto& rule : group.at("rules")) rules.push_back(rule);
    const bool evaluated =
        std::all_of(rules.begin(), rules.end(), [](const json& r) { return r.value("health", "") != "unknown"; });
    if ((evaluated && !rules.empty()) || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(250ms);
  }
  CHECK(rules.size() == alerts_in_file);
  for (const auto& rule : rules) {
    const std::string name = rule.value("name", "");
    INFO(name << ": " << rule.value("query", ""));
    CHECK(rule.value("type", "") == "alerting");
    CHECK(rule.value("health", "") == "ok");
    CHECK(rule.value("lastError", "") == "");
    // The expression once more through the query API: it parses, and every metric it
    // names is exported by the pipeline (a typo in a rule would never fire).
    CHECK(problem_with(rule.value("query", ""), false) == "");
    CHECK(rule.value("state", "") != "firing");
  }
}
