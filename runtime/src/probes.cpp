// ReadinessMonitor (the cached, background-refreshed readiness verdict) and LivenessWatch
// (heartbeats judged against their limits).
#include "boxcar/runtime/probes.hpp"

#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/redaction.hpp"

namespace boxcar {

namespace {

std::chrono::milliseconds as_millis(std::chrono::steady_clock::duration duration) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(duration);
}

}  // namespace

ReadinessMonitor::ReadinessMonitor(ProbeOptions options, Check check)
    : options_(std::move(options)), check_(std::move(check)), started_at_(Clock::now()) {
  if (options_.readiness_max_age <= options_.readiness_interval)
    throw ConfigError("probes.readiness_max_age_ms", "must exceed probes.readiness_interval_ms (" +
                                                         std::to_string(options_.readiness_interval.count()) +
                                                         " ms), or every verdict would go stale");
}

ReadinessMonitor::~ReadinessMonitor() { stop(); }

void ReadinessMonitor::start() {
  std::lock_guard lock(mutex_);
  if (thread_.joinable()) return;
  stopping_ = false;
  started_at_ = Clock::now();
  thread_ = std::thread([this] { loop(); });
}

void ReadinessMonitor::stop() {
  {
    std::lock_guard lock(mutex_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();  // a check in progress returns first: its own timeouts bound it
}

ReadinessReport ReadinessMonitor::run_check() noexcept {
  try {
    return check_();
  } catch (const std::exception& e) {
    return {.ready = false, .checks = {}, .detail = "readiness check failed: " + redact_secrets(e.what())};
  } catch (...) {
    return {.ready = false, .checks = {}, .detail = "readiness check failed with a non-standard exception"};
  }
}

void ReadinessMonitor::loop() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    heartbeat_.beat();
    lock.unlock();
    ReadinessReport verdict = run_check();  // may block: probes meanwhile read the previous verdict
    lock.lock();
    heartbeat_.beat();
    // Log a change of verdict (and a first verdict that is not ready), outside the lock.
    const bool changed = verdict_ ? verdict_->ready != verdict.ready : !verdict.ready;
    const std::string line = verdict.ready ? "readiness: ready" : "readiness: not ready: " + verdict.detail;
    verdict_ = std::move(verdict);
    checked_at_ = Clock::now();
    if (changed) {
      lock.unlock();
      logger("runtime")->info("{}", line);
      lock.lock();
    }
    wake_.wait_for(lock, options_.readiness_interval, [this] { return stopping_; });
  }
}

ReadinessReport ReadinessMonitor::report() const {
  std::lock_guard lock(mutex_);
  const auto now = Clock::now();
  ReadinessReport report{.ready = false, .checks = {}, .detail = "readiness not checked yet"};
  report.age = as_millis(now - started_at_);
  if (verdict_) {
    report = *verdict_;
    report.age = as_millis(now - checked_at_);
  }
  if (report.age > options_.readiness_max_age) {
    // The checking thread is stuck (a check that does not return): its last verdict
    // says nothing about now.
    report.ready = false;
    report.stale = true;
    report.detail = "readiness verdict is " + std::to_string(report.age.count()) +
                    " ms old, over probes.readiness_max_age_ms (" + std::to_string(options_.readiness_max_age.count()) +
                    " ms): the readiness check is stuck" +
                    (report.detail.empty() ? "" : "; last verdict: " + report.detail);
  }
  return report;
}

void LivenessWatch::watch(std::string name, const Heartbeat& heartbeat, std::chrono::milliseconds limit) {
  watched_.push_back({std::move(name), &heartbeat, limit});
}

LivenessReport LivenessWatch::report() const {
  LivenessReport report;
  for (const auto& loop : watched_) {
    const auto age = loop.heartbeat->age();
    if (!age || *age <= loop.limit) continue;
    report.alive = false;
    report.detail += (report.detail.empty() ? "" : "; ") + loop.name + " has not beaten for " +
                     std::to_string(as_millis(*age).count()) + " ms (limit " + std::to_string(loop.limit.count()) +
                     " ms)";
  }
  return report;
}

}  // namespace boxcar
