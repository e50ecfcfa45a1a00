// Test support: a throw-away SQS-compatible server (the local-aws-sqs npm package, run
// with Debian's nodejs) on a free loopback port, stopped and its directory removed when
// the object goes out of scope, also when a test fails. As root it runs as the
// unprivileged 'postgres' account (the one scripts/lib/postgres.sh uses), never as root.
//
// The package is pinned by examples/sqs/server/package-lock.json, which CMake copies with
// package.json and sqs_server.js into the build tree; the first test that needs the server
// runs `npm ci` there (under a file lock, as ctest runs test cases in parallel) and again
// whenever the lock file changed.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>

namespace boxcar::examples::sqs::testing {

class SqsServer {
 public:
  /// Why no server can be started here (node or npm missing), or nullopt.
  static std::optional<std::string> unavailable_reason();

  /// Installs the pinned package when missing, starts the server on a free loopback
  /// port and waits until it answers ListQueues.
  /// @throws std::runtime_error with the npm or server log when either fails.
  SqsServer();
  ~SqsServer();
  SqsServer(const SqsServer&) = delete;
  SqsServer& operator=(const SqsServer&) = delete;

  /// "http://127.0.0.1:<port>".
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int port() const noexcept { return port_; }

 private:
  void stop() noexcept;

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace boxcar::examples::sqs::testing
