// boxcar::Runtime — one host for every role a Boxcar process plays, from one
// RuntimeConfig: ingress only (accept, never claim), worker, publisher, or worker and
// publisher together. All roles share one connection pool, one Metrics registry, the
// HTTP endpoints (/metrics, /healthz, /readyz) and the background backlog collector.
//
// run_cli() gives an application's main the standard sub-commands, so a team deploys one
// binary as separate worker and publisher processes:
//
//   int main(int argc, char** argv) {
//     return boxcar::run_cli(argc, argv, [](boxcar::Runtime& runtime) {
//       return std::vector<boxcar::HandlerRegistration>{
//           {.consumer = "orders.projection.v1", .supports = {{"order.created", 1}},
//            .handler = std::make_shared<OrderProjection>(runtime.outbox())}};
//     });
//   }
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "boxcar/runtime/config.hpp"
#include "boxcar/runtime/http_server.hpp"
#include "boxcar/inbox/handler.hpp"
#include "boxcar/inbox/inbox.hpp"
#include "boxcar/outbox/outbox_emitter.hpp"
#include "boxcar/core/metrics.hpp"

namespace boxcar {

enum class Role { Ingress, Worker, Publisher, All };

class Runtime {
 public:
  /// Application handlers, built once the runtime exists (so they can take its outbox).
  using HandlerFactory = std::function<std::vector<HandlerRegistration>(Runtime&)>;

  /// Creates the pool and metrics; opens no connection yet.
  /// @throws ConfigError
  explicit Runtime(RuntimeConfig config);
  ~Runtime();  // stop()
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const RuntimeConfig& config() const noexcept;
  std::shared_ptr<ConnectionPool> pool() const;
  std::shared_ptr<Metrics> metrics() const;
  /// The inbox of the declared consumers. @throws ConfigError("consumers") when none are declared.
  Inbox& inbox();
  /// The outbox emitter to inject into handlers that publish events.
  OutboxEmitter& outbox();

  /// Starts `role`: HTTP endpoints and backlog collection always; the worker for
  /// Worker/All (with `handlers`, validated: see Worker); the publisher for
  /// Publisher/All. Ingress claims nothing.
  /// @throws ConfigError for an invalid configuration of the role.
  void start(Role role, std::vector<HandlerRegistration> handlers = {});
  /// Graceful stop: worker (hand back unstarted claims, grace period), publisher (batches
  /// in flight), collector, HTTP. Idempotent.
  void stop();

  /// Handler threads the worker abandoned (see Worker::abandoned_handlers()); 0 without
  /// a worker. Role commands exit with status 1 when this is non-zero.
  std::uint64_t abandoned_handlers() const;

  /// The bound HTTP port (0 when the server is disabled).
  int http_port() const;
  /// The bound port of the operator console (0 unless console.enabled).
  int console_port() const;
  /// What /readyz serves: the cached verdict of the background readiness check (every
  /// probes.readiness_interval_ms, from start()) with its age. The checks, in order:
  /// `database` (the check's own kept session answers), `migrations` (the schema is at
  /// this build's latest version; failed while the database is unreachable, since it
  /// cannot be confirmed) and, when a publisher runs, `kafka` (the producer reaches a
  /// broker). Ready when all pass; `detail` names each failure. Not ready before start()
  /// and its first check, and when the verdict is older than probes.readiness_max_age_ms.
  /// Never blocks on the database or the broker. Thread-safe.
  ReadinessReport readiness() const;
  /// readiness().ready, with its detail in `*detail` when given.
  bool ready(std::string* detail = nullptr) const;
  /// What /healthz serves: alive unless a loop of this process (the readiness check; the
  /// publishing thread) has not beaten for longer than its longest legitimate iteration
  /// plus probes.liveness_stall_ms. Reads heartbeats only. Thread-safe.
  LivenessReport liveness() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The standard command line of a Boxcar application (see docs/runtime.md):
///   worker | publisher | all | ingress   run that role until SIGTERM/SIGINT
///   migrate                              apply migrations
///   status [--json]                      backlog per consumer/status and outbox state
///   dead list|show|retry|discard ...     operator recovery of DEAD records
///   purge [...]                          retention of finished rows
///   config check                         print the effective configuration (secrets redacted)
/// Configuration flags (--database-url, --schema, --set KEY=VALUE, ...) work before or after
/// the command; `COMMAND --help` prints a command's own options.
/// Returns the process exit code (0 ok or --help, 1 failure, 2 usage or configuration
/// error, reported on stderr with the offending argument or key named). A role whose worker
/// abandoned a handler thread exits 1 after its graceful stop.
int run_cli(int argc, char** argv, Runtime::HandlerFactory handlers = {});

}  // namespace boxcar
