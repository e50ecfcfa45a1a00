// The probes behind /readyz and /healthz, built so that neither can starve the other:
//
// - ReadinessMonitor runs the readiness checks (database, schema, Kafka: whatever its
//   check function does) on its own thread every `readiness_interval` and caches the
//   verdict. A probe reads the cache and its age and never waits for a check: a slow
//   database or broker slows the refresh, not the probe. A verdict older than
//   `readiness_max_age` (the checking thread is stuck) counts as not ready.
// - LivenessWatch judges liveness from heartbeats of the process's loops (atomics only:
//   never the database or the broker), so /healthz answers during exactly the outages
//   that fail readiness, and fails only when a loop itself stops.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "boxcar/core/heartbeat.hpp"
#include "boxcar/runtime/http_server.hpp"

namespace boxcar {

struct ProbeOptions {
  /// probes.readiness_interval_ms: pause between two background readiness checks.
  std::chrono::milliseconds readiness_interval{std::chrono::seconds(5)};
  /// probes.readiness_max_age_ms: a cached verdict older than this counts as not ready
  /// (its check is stuck). Must exceed readiness_interval plus the slowest check (a
  /// database connect_timeout, 10 s by default, plus the 2 s Kafka metadata request).
  std::chrono::milliseconds readiness_max_age{std::chrono::seconds(30)};
  /// probes.liveness_stall_ms: how long a loop may go without a heartbeat beyond its own
  /// longest legitimate iteration before /healthz fails.
  std::chrono::milliseconds liveness_stall{std::chrono::seconds(120)};
};

class ReadinessMonitor {
 public:
  /// One readiness check: runs every input and returns the verdict (age and stale are
  /// set by the monitor). It may block; it runs on one thread at a time.
  using Check = std::function<ReadinessReport()>;

  /// @throws ConfigError("probes.readiness_max_age_ms") unless readiness_max_age exceeds
  ///   readiness_interval.
  ReadinessMonitor(ProbeOptions options, Check check);
  ~ReadinessMonitor();  // stop()
  ReadinessMonitor(const ReadinessMonitor&) = delete;
  ReadinessMonitor& operator=(const ReadinessMonitor&) = delete;

  /// Starts the checking thread; the first check runs at once. No-op when running.
  void start();
  /// Stops the thread, waiting for a check in progress to return. Idempotent.
  void stop();

  /// The cached verdict with its age. Never blocks on a check (only on a mutex held for
  /// a copy). Not ready before the first check returned ("not checked yet"), and not
  /// ready, with `stale` set, when the last verdict is older than readiness_max_age.
  /// A check that throws is a not-ready verdict naming the exception. Thread-safe.
  ReadinessReport report() const;

  /// Beats before and after every check (see LivenessWatch).
  const Heartbeat& heartbeat() const noexcept { return heartbeat_; }

 private:
  using Clock = std::chrono::steady_clock;
  void loop();
  ReadinessReport run_check() noexcept;

  const ProbeOptions options_;
  const Check check_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::optional<ReadinessReport> verdict_;
  Clock::time_point checked_at_{};
  Clock::time_point started_at_{};
  Heartbeat heartbeat_;
  std::thread thread_;
};

class LivenessWatch {
 public:
  /// Watches `heartbeat` (which must outlive this watch) under `name`: the process is not
  /// alive when its last beat is older than `limit`. A loop that has not beaten yet is
  /// still starting and counts as alive. Call before report() is used concurrently.
  void watch(std::string name, const Heartbeat& heartbeat, std::chrono::milliseconds limit);

  /// Alive unless a watched loop stalled; `detail` names each stalled one. Reads atomics
  /// only. Thread-safe once watching is set up.
  LivenessReport report() const;

 private:
  struct Watched {
    std::string name;
    const Heartbeat* heartbeat;
    std::chrono::milliseconds limit;
  };
  std::vector<Watched> watched_;
};

}  // namespace boxcar
