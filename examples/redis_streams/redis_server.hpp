// Test support: a throw-away redis-server on a free loopback port, stopped (and its
// directory removed) when the object goes out of scope, also when a test fails.
// As root it runs as the unprivileged 'postgres' account (the one scripts/lib/postgres.sh
// uses), never as root.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace redis_streams::testing {

class RedisServer {
 public:
  /// The redis-server executable on PATH, or empty when it is not installed.
  static std::string find_executable();

  /// Starts redis-server and waits until it answers PING.
  /// @throws std::runtime_error when it does not come up.
  explicit RedisServer(const std::string& executable);
  ~RedisServer();
  RedisServer(const RedisServer&) = delete;
  RedisServer& operator=(const RedisServer&) = delete;

  int port() const noexcept { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  bool start(const std::string& executable, int port);
  void stop() noexcept;

  std::filesystem::path dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace redis_streams::testing
