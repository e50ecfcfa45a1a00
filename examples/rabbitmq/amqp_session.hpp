// A minimal RAII wrapper over one librabbitmq connection with one channel, shared by the
// RabbitMQ ingress example and its integration test. librabbitmq reports errors as reply
// structs and status codes; this turns them into AmqpError exceptions so the example reads
// top-down.
//
// Private to examples/rabbitmq: it exposes librabbitmq's C types, which Boxcar's public
// headers never do. Thread-safety: none; one session belongs to one thread.
#pragma once

#include <amqp.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>

namespace boxcar::examples {

struct AmqpOptions {
  std::string host = "localhost";
  int port = 5672;
  std::string user = "guest";
  std::string password = "guest";
  std::string vhost = "/";
  /// Seconds; librabbitmq services heartbeats while it waits for frames.
  int heartbeat = 30;
};

/// A failed AMQP operation: a broken socket, a refused login, or the broker closing the
/// channel or connection (then `reply_code()` is the AMQP code, e.g. 406 PRECONDITION_FAILED).
class AmqpError : public std::runtime_error {
 public:
  explicit AmqpError(const std::string& message, int reply_code = 0)
      : std::runtime_error(message), reply_code_(reply_code) {}
  int reply_code() const noexcept { return reply_code_; }

 private:
  int reply_code_;
};

/// A header value as the example sends and reads it: text or an integer.
using HeaderValue = std::variant<std::string, std::int64_t>;

/// What a test or a producer publishes; unset properties are left out of the frame.
struct OutgoingMessage {
  std::optional<std::string> message_id{};
  std::optional<std::string> type{};
  /// The publishing user; RabbitMQ refuses the publish (406) when it is not the
  /// connection's user, so a consumer can trust it.
  std::optional<std::string> user_id{};
  std::map<std::string, HeaderValue> headers{};
  std::string body{};
};

/// A message fetched with basic.get (used by tests to inspect the dead-letter queue).
struct FetchedMessage {
  std::string message_id{};
  std::string body{};
};

std::string to_string(amqp_bytes_t bytes);
inline amqp_bytes_t to_bytes(std::string_view text) {
  return amqp_bytes_t{text.size(), const_cast<char*>(text.data())};
}

class AmqpSession {
 public:
  static constexpr amqp_channel_t kChannel = 1;

  /// Opens the TCP connection, logs in and opens channel 1.
  /// @throws AmqpError when any step fails.
  explicit AmqpSession(const AmqpOptions& options,
                       std::chrono::milliseconds connect_timeout = std::chrono::seconds(10));
  ~AmqpSession();
  AmqpSession(const AmqpSession&) = delete;
  AmqpSession& operator=(const AmqpSession&) = delete;

  amqp_connection_state_t state() const noexcept { return conn_; }

  /// Throws AmqpError describing `reply` unless it is AMQP_RESPONSE_NORMAL.
  void check(const amqp_rpc_reply_t& reply, std::string_view doing) const;
  /// Throws AmqpError for a non-zero librabbitmq status code.
  void check_status(int status, std::string_view doing) const;
  /// check(amqp_get_rpc_reply()) after a synchronous method call.
  void check_last_rpc(std::string_view doing) const;

  /// Publishes persistently to the default exchange (routing key = queue name).
  void publish(const std::string& queue, const OutgoingMessage& message);
  /// Ready (not unacknowledged) messages in `queue`, via a passive queue.declare.
  std::uint32_t message_count(const std::string& queue);
  /// basic.get with auto-ack; nullopt when the queue is empty.
  std::optional<FetchedMessage> get(const std::string& queue);

 private:
  amqp_connection_state_t conn_ = nullptr;
  bool channel_open_ = false;
};

}  // namespace boxcar::examples
