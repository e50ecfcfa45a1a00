// Debian's `prometheus`, started by a test on loopback as the invoking user: its own
// temporary storage and configuration directory, a port below the ephemeral range, a 1 s
// scrape and rule evaluation interval, and the HTTP API (/api/v1/...) as the test's only
// way in. Stopped (SIGTERM, then SIGKILL) and its directory removed on destruction.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "child_process.hpp"

namespace boxcar::testing {

/// One scrape target: a process's /metrics, labelled `role` in every series.
struct ScrapeTarget {
  std::string role;
  int port = 0;
};

/// A free TCP port on 127.0.0.1 below the kernel's ephemeral range (one inside it can be
/// taken by an outgoing client socket between the check and the server's bind).
int free_port_below_ephemeral();

/// A URL query component: every byte but [A-Za-z0-9-._~] percent-encoded.
std::string url_encode(const std::string& text);

class PrometheusServer {
 public:
  /// The `prometheus` binary on PATH, or "" when the package is not installed.
  static std::string binary();

  /// Starts prometheus scraping `targets` (job "boxcar") and evaluating `rule_files`, and
  /// waits until /-/ready answers 200. @throws std::runtime_error when it does not become
  /// ready within 30 s (its output is in the message).
  PrometheusServer(const std::vector<ScrapeTarget>& targets, const std::vector<std::filesystem::path>& rule_files);
  ~PrometheusServer();
  PrometheusServer(const PrometheusServer&) = delete;
  PrometheusServer& operator=(const PrometheusServer&) = delete;

  int port() const { return port_; }
  /// GET `path_and_query` on the API; the parsed JSON answer (status "success" or
  /// "error", with `errorType` and `error`). @throws std::runtime_error when the answer
  /// is not JSON.
  nlohmann::json api(const std::string& path_and_query) const;
  /// An instant query (/api/v1/query) of `promql` now.
  nlohmann::json query(const std::string& promql) const;
  /// Every metric name Prometheus holds (/api/v1/label/__name__/values).
  std::vector<std::string> metric_names() const;
  /// What prometheus printed so far (for failure messages).
  std::string output() const { return process_->output(); }

 private:
  std::filesystem::path directory_;
  int port_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

}  // namespace boxcar::testing
