// A small RAII client for the Redis commands the stream ingress needs, over hiredis.
//
// Replies are converted to RedisValue trees so hiredis' C types stay in redis_client.cpp.
// Every command goes through redisCommandArgv (binary-safe arguments, no format strings),
// so stream field values from producers can never be interpreted as command syntax.
//
// Thread-safety: a RedisClient is one connection; use it from one thread at a time.
#pragma once

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

struct redisContext;

namespace redis_streams {

/// One RESP2 reply.
struct RedisValue {
  enum class Type { Nil, String, Status, Integer, Array, Error };
  Type type = Type::Nil;
  std::string str{};  // String, Status, Error
  long long integer = 0;
  std::vector<RedisValue> elements{};  // Array

  bool is_nil() const noexcept { return type == Type::Nil; }
  bool is_error() const noexcept { return type == Type::Error; }
};

/// The connection failed (connect, I/O, timeout, protocol). The client is unusable
/// afterwards: reconnect.
class RedisConnectionError final : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The server answered a command with an error reply (e.g. "NOGROUP ...").
class RedisCommandError final : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct RedisOptions {
  std::string host = "127.0.0.1";
  int port = 6379;
  /// AUTH credentials; the username needs Redis 6 ACLs. Never logged.
  std::string username{};
  std::string password{};
  int database = 0;
  /// Connect timeout and the socket timeout of commands without BLOCK.
  std::chrono::milliseconds timeout{5000};

  /// Parses redis://[[username]:password@]host[:port][/db].
  /// @throws std::invalid_argument for anything else (rediss:// TLS is not supported
  ///   by this example).
  static RedisOptions from_url(const std::string& url);
  /// "host:port/db", for logs (no credentials).
  std::string describe() const;
};

class RedisClient {
 public:
  /// Connects, authenticates and selects the database.
  /// @throws RedisConnectionError, RedisCommandError (AUTH/SELECT refused).
  explicit RedisClient(RedisOptions options);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  /// Sends one command and returns its reply, error replies included.
  /// `socket_timeout` bounds the wait for the reply (use more than a BLOCK time).
  /// @throws RedisConnectionError when the connection fails.
  RedisValue command(const std::vector<std::string>& args,
                     std::chrono::milliseconds socket_timeout = std::chrono::milliseconds::zero());

  /// command(), but an error reply throws RedisCommandError.
  RedisValue call(const std::vector<std::string>& args,
                  std::chrono::milliseconds socket_timeout = std::chrono::milliseconds::zero());

  const RedisOptions& options() const noexcept { return options_; }

 private:
  void set_timeout(std::chrono::milliseconds timeout);

  RedisOptions options_;
  redisContext* context_ = nullptr;
  std::chrono::milliseconds current_timeout_{0};
};

}  // namespace redis_streams
