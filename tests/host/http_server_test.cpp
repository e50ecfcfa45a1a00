// The HTTP server of the runtime host: /metrics, /healthz and /readyz on an ephemeral
// port, readiness and liveness failures, and a port that is taken.
#include <catch2/catch.hpp>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "boxcar/runtime/http_server.hpp"
#include "boxcar/core/error.hpp"
#include "boxcar/core/metrics.hpp"
#include "exposition.hpp"
#include "http_get.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using Catch::Matchers::Contains;

TEST_CASE("the HTTP server serves metrics, liveness and readiness on an ephemeral port") {
  auto metrics = std::make_shared<Metrics>();
  metrics->accept_result("orders.v1", "accepted");
  std::atomic<bool> database_up{true};
  std::atomic<int> probes{0};
  HttpServer server({.listen = "127.0.0.1:0"}, metrics, [&] {
    ++probes;
    const bool up = database_up;
    return ReadinessReport{
        .ready = up, .checks = {{"database", up}, {"migrations", true}}, .detail = up ? "" : "database unreachable"};
  });
  REQUIRE(server.port() > 0);

  const auto scrape = http_request(server.port(), "GET", "/metrics");
  CHECK(scrape.status == 200);
  CHECK_THAT(scrape.headers, Contains("text/plain; version=0.0.4"));
  CHECK(
      Exposition(scrape.body).value("boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "accepted"}}) ==
      1);
  // A scrape sees updates made after the server started.
  metrics->accept_result("orders.v1", "accepted");
  CHECK(Exposition(http_request(server.port(), "GET", "/metrics").body)
            .value("boxcar_inbox_accept_total", {{"consumer", "orders.v1"}, {"result", "accepted"}}) == 2);

  const auto health = http_request(server.port(), "GET", "/healthz");
  CHECK(health.status == 200);
  CHECK(health.body == "ok\n");

  const auto ready = http_request(server.port(), "GET", "/readyz");
  CHECK(ready.status == 200);
  CHECK_THAT(ready.headers, Contains("application/json"));
  const auto ready_body = nlohmann::json::parse(ready.body);
  CHECK(ready_body["ready"] == true);
  CHECK(ready_body["checks"]["database"] == true);
  CHECK(ready_body["checks"]["migrations"] == true);
  CHECK(ready_body["age_ms"] == 0);
  CHECK(ready_body["stale"] == false);

  database_up = false;
  const auto not_ready = http_request(server.port(), "GET", "/readyz");
  CHECK(not_ready.status == 503);
  const auto not_ready_body = nlohmann::json::parse(not_ready.body);
  CHECK(not_ready_body["ready"] == false);
  CHECK(not_ready_body["checks"]["database"] == false);
  CHECK(not_ready_body["checks"]["migrations"] == true);
  CHECK(not_ready_body["detail"] == "database unreachable");
  CHECK(probes == 2);

  const auto head = http_request(server.port(), "HEAD", "/healthz");
  CHECK(head.status == 200);
  CHECK(head.body.empty());
  CHECK(http_request(server.port(), "POST", "/metrics").status == 405);
  CHECK(http_request(server.port(), "GET", "/nothing-here").status == 404);
}

TEST_CASE("a readiness callback that throws makes /readyz answer 503 with the reason") {
  HttpServer server({.listen = "127.0.0.1:0"}, nullptr,
                    []() -> ReadinessReport { throw std::runtime_error("pool exhausted"); });
  const auto response = http_request(server.port(), "GET", "/readyz");
  CHECK(response.status == 503);
  CHECK_THAT(nlohmann::json::parse(response.body)["detail"].get<std::string>(), Contains("pool exhausted"));
  // Without metrics /metrics still answers, with an empty exposition.
  const auto scrape = http_request(server.port(), "GET", "/metrics");
  CHECK(scrape.status == 200);
  CHECK(scrape.body.empty());
}

TEST_CASE("/healthz answers from the liveness callback alone: 503 naming the stalled loop, never asking readiness") {
  std::atomic<bool> alive{true};
  std::atomic<int> readiness_calls{0};
  HttpServer server(
      {.listen = "127.0.0.1:0"}, nullptr,
      [&] {
        ++readiness_calls;
        return ReadinessReport{.ready = false, .checks = {{"database", false}}, .detail = "database unreachable"};
      },
      [&] {
        return alive ? LivenessReport{}
                     : LivenessReport{.alive = false, .detail = "publisher loop has not beaten for 200000 ms"};
      });
  const auto healthy = http_request(server.port(), "GET", "/healthz");
  CHECK(healthy.status == 200);  // readiness failing does not make the process unhealthy
  CHECK(healthy.body == "ok\n");
  alive = false;
  const auto stalled = http_request(server.port(), "GET", "/healthz");
  CHECK(stalled.status == 503);
  CHECK(stalled.body == "publisher loop has not beaten for 200000 ms\n");
  CHECK(readiness_calls == 0);
  // A stale verdict is reported as such.
  HttpServer stale_server({.listen = "127.0.0.1:0"}, nullptr, [] {
    return ReadinessReport{.ready = false,
                           .checks = {{"database", true}},
                           .detail = "stuck",
                           .age = std::chrono::milliseconds(45000),
                           .stale = true};
  });
  const auto stale = nlohmann::json::parse(http_request(stale_server.port(), "GET", "/readyz").body);
  CHECK(stale["age_ms"] == 45000);
  CHECK(stale["stale"] == true);
  CHECK(stale["ready"] == false);
}

TEST_CASE("an HTTP server whose port is taken fails with a ConfigError naming http.listen") {
  HttpServer first({.listen = "127.0.0.1:0"}, nullptr, nullptr);
  const std::string taken = "127.0.0.1:" + std::to_string(first.port());
  try {
    HttpServer second({.listen = taken}, nullptr, nullptr);
    FAIL("a second server bound " << taken);
  } catch (const ConfigError& e) {
    CHECK(e.key() == "http.listen");
    CHECK_THAT(std::string(e.what()), Contains(taken));
  }
  CHECK_THROWS_AS(HttpServer({.listen = "not-an-address"}, nullptr, nullptr), ConfigError);
  // The first server is unaffected.
  CHECK(http_request(first.port(), "GET", "/healthz").status == 200);
}
