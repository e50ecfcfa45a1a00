// Retention configuration (retention.* keys, `boxcar purge` flags) and the janitor in the
// Runtime host (docs/operations.md, "Janitor").
#include <catch2/catch.hpp>

#include "boxcar/core/error.hpp"
#include "boxcar/ops/retention.hpp"
#include "boxcar/runtime/config.hpp"
#include "boxcar/runtime/runtime.hpp"
#include "boxcar/testing/eventually.hpp"
#include "exposition.hpp"
#include "test_database.hpp"

using namespace boxcar;
using namespace std::chrono_literals;
using boxcar::testing::TestDatabase;

TEST_CASE("configuration refuses an inbox retention shorter than the redelivery horizon, naming both keys") {
  const std::vector<std::string> env = {"BOXCAR_DATABASE_URL=postgresql://u@h/db", "BOXCAR_RETENTION_INBOX_HOURS=24",
                                        "BOXCAR_RETENTION_REDELIVERY_HORIZON_HOURS=48"};
  std::string key, message;
  try {
    load_config({.environment = env});
  } catch (const ConfigError& e) {
    key = e.key();
    message = e.what();
  }
  CHECK(key == "retention.inbox_hours");
  CHECK_THAT(message, Catch::Contains("retention.redelivery_horizon_hours") && Catch::Contains("48 h"));
  // Equal is enough; the defaults (30 days, horizon not told) pass.
  CHECK(
      load_config({.environment = env, .flags = {{"retention.inbox_hours", "48"}}}).janitor.retention.inbox_retention ==
      48h);
  const std::vector<std::string> defaults = {env.front()};
  CHECK_NOTHROW(load_config({.environment = defaults}));
  CHECK(load_config({.environment = defaults}).janitor.enabled == false);
}

TEST_CASE(
    "retention.dead_hours is off by default and, when set, refused below the redelivery horizon with a "
    "ConfigError naming it") {
  const std::vector<std::string> env = {"BOXCAR_DATABASE_URL=postgresql://u@h/db",
                                        "BOXCAR_RETENTION_REDELIVERY_HORIZON_HOURS=48"};
  CHECK(load_config({.environment = env}).janitor.retention.dead_retention == 0h);
  std::string key, message;
  try {
    load_config({.environment = env, .flags = {{"retention.dead_hours", "24"}}});
  } catch (const ConfigError& e) {
    key = e.key();
    message = e.what();
  }
  CHECK(key == "retention.dead_hours");
  CHECK_THAT(message, Catch::Contains("retention.redelivery_horizon_hours") && Catch::Contains("48 h"));
  CHECK(load_config({.environment = env, .flags = {{"retention.dead_hours", "48"}}}).janitor.retention.dead_retention ==
        48h);
  // The purge command's flag is checked the same way, under its own name.
  try {
    validate_retention({.redelivery_horizon = 72h, .dead_retention = 24h}, "--inbox-days", "--redelivery-horizon-days",
                       "--dead-days");
    FAIL("expected ConfigError --dead-days");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "--dead-days");
  }
  CHECK_NOTHROW(validate_retention({.inbox_retention = 72h, .redelivery_horizon = 72h, .dead_retention = 0h}));
}

TEST_CASE("validate_retention names the caller's fields for a retention shorter than the horizon") {
  std::string key;
  try {
    validate_retention({.inbox_retention = 24h, .redelivery_horizon = 72h}, "--inbox-days",
                       "--redelivery-horizon-days");
  } catch (const ConfigError& e) {
    key = e.key();
    CHECK_THAT(e.what(), Catch::Contains("--redelivery-horizon-days"));
  }
  CHECK(key == "--inbox-days");
  CHECK_NOTHROW(validate_retention({.inbox_retention = 72h, .redelivery_horizon = 72h}));
}

TEST_CASE("a Runtime with retention.janitor runs the janitor and exports its leadership") {
  TestDatabase db;
  RuntimeConfig config;
  config.pool.url = db.url();
  config.schema = db.schema();
  config.consumers = {"orders.v1"};
  config.janitor.enabled = true;
  config.janitor.interval = 100ms;
  Runtime runtime(config);
  runtime.start(Role::Ingress);
  const auto metric = [&](const std::string& name, const boxcar::testing::Labels& labels = {}) {
    return boxcar::testing::metric_value(runtime.metrics()->serialize(), name, labels);
  };
  CHECK(boxcar::testing::eventually([&] { return metric("boxcar_janitor_leader") == 1.0; }, 10s));
  CHECK(boxcar::testing::eventually(
      [&] {
        return metric("boxcar_janitor_runs_total", {{"outcome", "ok"}}) >= 1.0;
      },
      10s));
  runtime.stop();
  CHECK(metric("boxcar_janitor_leader") == 0.0);
}
