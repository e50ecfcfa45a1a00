// boxcar::HttpServer — the process's operational HTTP endpoints, served by civetweb
// (which stays out of this header):
//
//   GET /metrics   200, Prometheus text format 0.0.4: Metrics::serialize() (a copy of
//                  in-memory values; never touches the database)
//   GET /healthz   200 "ok" while the liveness callback reports the process alive, else 503
//                  with its reason (liveness: restart the process)
//   GET /readyz    200 or 503 with {"ready":..,"checks":{"name":true|false,..},"detail":"..",
//                  "age_ms":..,"stale":..} from the readiness callback (readiness: take
//                  traffic / count as a worker)
//
// Other paths answer 404, other methods 405. The server runs two civetweb threads, so both
// callbacks must answer at once, from memory: a callback that blocks starves the other
// endpoints (the Runtime's serve a cached verdict and heartbeats, docs/operations.md).
//
// Thread-safety: the callbacks are called from civetweb's threads, possibly concurrently;
// they must be thread-safe and must not block (they run on every probe).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "boxcar/core/metrics.hpp"

namespace boxcar {

struct HttpOptions {
  /// civetweb `listening_ports` syntax: "127.0.0.1:9464", "9464" (all interfaces),
  /// "[::1]:9464", several separated by commas. Port 0 binds an ephemeral port (see
  /// HttpServer::port()).
  std::string listen = "127.0.0.1:9464";
};

struct ReadinessReport {
  bool ready = false;
  /// Each check's name and whether it passed, in the order they should be listed.
  std::vector<std::pair<std::string, bool>> checks{};
  /// Free text for an operator (why not ready); empty when there is nothing to say.
  std::string detail{};
  /// How old the verdict is (readiness is checked in the background and served cached).
  std::chrono::milliseconds age{0};
  /// The verdict is older than allowed (the check is stuck): never ready then.
  bool stale = false;
};

struct LivenessReport {
  bool alive = true;
  /// Why not alive (which thread stopped beating); empty when alive.
  std::string detail{};
};

class HttpServer {
 public:
  /// Binds and starts serving before it returns.
  /// `metrics` may be null (/metrics then serves an empty exposition); `readiness` may be
  /// empty (/readyz then always answers ready), and so may `liveness` (/healthz then
  /// always answers ok). A callback that throws makes its endpoint answer 503 with the
  /// exception's message.
  /// @throws ConfigError("http.listen", ...) when the address is malformed or cannot be
  ///   bound (e.g. the port is in use).
  HttpServer(HttpOptions options, std::shared_ptr<Metrics> metrics, std::function<ReadinessReport()> readiness,
             std::function<LivenessReport()> liveness = {});
  /// Stops accepting, waits for requests in progress and joins civetweb's threads.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  /// The port actually bound (the first listening port when several are configured).
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxcar
