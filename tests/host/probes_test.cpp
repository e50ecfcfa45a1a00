// The probes' building blocks without a database: the readiness verdict is served from a
// cache that a background check refreshes, so a probe never waits for a check, and a check
// that gets stuck turns the cached verdict stale (not ready); liveness follows heartbeats.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "boxcar/core/error.hpp"
#include "boxcar/runtime/probes.hpp"
#include "boxcar/testing/eventually.hpp"

using namespace boxcar;
using namespace boxcar::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

/// A gate a check can be made to wait at until the test opens it.
class Gate {
 public:
  void close() {
    std::lock_guard lock(mutex_);
    open_ = false;
  }
  void open() {
    {
      std::lock_guard lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  void pass() {
    std::unique_lock lock(mutex_);
    ++waiting_;
    changed_.wait(lock, [this] { return open_; });
    --waiting_;
  }
  int waiting() {
    std::lock_guard lock(mutex_);
    return waiting_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = true;
  int waiting_ = 0;
};

}  // namespace

TEST_CASE("readiness is served from the last verdict of the background check, with its age") {
  std::atomic<int> checks{0};
  std::atomic<bool> database_up{true};
  ReadinessMonitor monitor({.readiness_interval = 20ms, .readiness_max_age = 10min}, [&] {
    ++checks;
    const bool up = database_up;
    return ReadinessReport{.ready = up, .checks = {{"database", up}}, .detail = up ? "" : "database unreachable"};
  });
  const auto before = monitor.report();
  CHECK_FALSE(before.ready);
  CHECK(before.detail == "readiness not checked yet");
  CHECK(checks == 0);

  monitor.start();
  CHECK(eventually([&] { return monitor.report().ready; }, 10s));
  const int checked = checks;
  for (int i = 0; i < 100; ++i) monitor.report();
  CHECK(checks < checked + 100);  // reports read the cache: they do not run a check each

  database_up = false;
  CHECK(eventually([&] { return monitor.report().detail == "database unreachable"; }, 10s));
  const auto down = monitor.report();
  CHECK_FALSE(down.ready);
  CHECK_FALSE(down.stale);
  CHECK(down.checks == std::vector<std::pair<std::string, bool>>{{"database", false}});
  monitor.stop();
}

TEST_CASE("a readiness check that gets stuck leaves probes answering at once, and its verdict goes stale: not ready") {
  Gate gate;
  std::atomic<int> checks{0};
  ReadinessMonitor monitor({.readiness_interval = 10ms, .readiness_max_age = 300ms}, [&] {
    ++checks;
    gate.pass();
    return ReadinessReport{.ready = true, .checks = {{"database", true}}, .detail = ""};
  });
  monitor.start();
  REQUIRE(eventually([&] { return monitor.report().ready; }, 10s));

  gate.close();  // the next check hangs, as on a database that stopped answering
  REQUIRE(eventually([&] { return gate.waiting() == 1; }, 10s));
  // Liveness bound, not a timing assertion: a probe must not wait for the stuck check.
  const auto answered = [&] {
    const auto start = std::chrono::steady_clock::now();
    const auto report = monitor.report();
    return std::make_pair(report, std::chrono::steady_clock::now() - start);
  };
  const auto [first, first_took] = answered();
  CHECK(first_took < 1s);

  CHECK(eventually([&] { return monitor.report().stale; }, 10s));
  const auto [stale, stale_took] = answered();
  CHECK(stale_took < 1s);
  CHECK(stale.stale);
  CHECK_FALSE(stale.ready);
  CHECK(stale.age >= 300ms);
  CHECK_THAT(stale.detail, Contains("readiness check is stuck"));
  CHECK_THAT(stale.detail, Contains("probes.readiness_max_age_ms"));
  CHECK(stale.checks == std::vector<std::pair<std::string, bool>>{{"database", true}});  // the last known inputs

  gate.open();  // the check returns: fresh again
  CHECK(eventually([&] { return monitor.report().ready; }, 10s));
  CHECK_FALSE(monitor.report().stale);
  monitor.stop();
}

TEST_CASE("a readiness check that throws is a not-ready verdict naming the exception") {
  ReadinessMonitor monitor({.readiness_interval = 10ms, .readiness_max_age = 10min},
                           []() -> ReadinessReport { throw std::runtime_error("pool exhausted"); });
  monitor.start();
  CHECK(eventually([&] { return monitor.report().detail.find("pool exhausted") != std::string::npos; }, 10s));
  CHECK_FALSE(monitor.report().ready);
}

TEST_CASE("a readiness max age that does not exceed the interval is a ConfigError naming the key") {
  try {
    ReadinessMonitor monitor({.readiness_interval = 5s, .readiness_max_age = 5s}, [] { return ReadinessReport{}; });
    FAIL("accepted a max age equal to the interval");
  } catch (const ConfigError& e) {
    CHECK(e.key() == "probes.readiness_max_age_ms");
  }
}

TEST_CASE("liveness fails only when a watched loop stopped beating past its limit, naming it") {
  Heartbeat starting;  // never beaten: still starting, alive
  Heartbeat beating;
  Heartbeat stalled;
  beating.beat();
  stalled.beat();
  std::this_thread::sleep_for(20ms);  // ages the beats past the stalled loop's 1 ms limit
  beating.beat();

  LivenessWatch watch;
  watch.watch("starting loop", starting, 1ms);
  watch.watch("beating loop", beating, 1h);
  CHECK(watch.report().alive);
  CHECK(watch.report().detail.empty());

  watch.watch("stalled loop", stalled, 1ms);
  const auto report = watch.report();
  CHECK_FALSE(report.alive);
  CHECK_THAT(report.detail, Contains("stalled loop has not beaten for"));
  CHECK_THAT(report.detail, !Contains("beating loop"));
  CHECK_THAT(report.detail, !Contains("starting loop"));
}

TEST_CASE("the readiness monitor's own loop beats while it waits between checks") {
  ReadinessMonitor monitor({.readiness_interval = 10ms, .readiness_max_age = 10min},
                           [] { return ReadinessReport{.ready = true, .checks = {}, .detail = ""}; });
  CHECK_FALSE(monitor.heartbeat().age().has_value());
  monitor.start();
  CHECK(eventually([&] { return monitor.heartbeat().age().has_value(); }, 10s));
  LivenessWatch watch;
  watch.watch("readiness check", monitor.heartbeat(), 1h);
  CHECK(watch.report().alive);
}
