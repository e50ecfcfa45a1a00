#include "amqp_session.hpp"

#include <amqp_tcp_socket.h>

#include <sys/time.h>

#include <vector>

namespace boxcar::examples {

std::string to_string(amqp_bytes_t bytes) {
  return bytes.len == 0 ? std::string() : std::string(static_cast<const char*>(bytes.bytes), bytes.len);
}

AmqpSession::AmqpSession(const AmqpOptions& options, std::chrono::milliseconds connect_timeout) {
  conn_ = amqp_new_connection();
  if (!conn_) throw AmqpError("amqp: out of memory");
  // The session owns conn_ from here on; ~AmqpSession is not run when the constructor
  // throws, so every failure path below releases it through `fail`.
  const auto fail = [this](const std::string& message, int code = 0) {
    amqp_destroy_connection(conn_);
    conn_ = nullptr;
    throw AmqpError(message, code);
  };
  amqp_socket_t* socket = amqp_tcp_socket_new(conn_);
  if (!socket) fail("amqp: cannot create a TCP socket");
  const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(connect_timeout).count();
  timeval timeout{static_cast<time_t>(micros / 1000000), static_cast<suseconds_t>(micros % 1000000)};
  const std::string where = options.host + ":" + std::to_string(options.port);
  if (const int status = amqp_socket_open_noblock(socket, options.host.c_str(), options.port, &timeout);
      status != AMQP_STATUS_OK) {
    fail("amqp: cannot connect to " + where + ": " + amqp_error_string2(status));
  }
  amqp_set_handshake_timeout(conn_, &timeout);
  amqp_set_rpc_timeout(conn_, &timeout);
  const amqp_rpc_reply_t login = amqp_login(conn_, options.vhost.c_str(), 0, AMQP_DEFAULT_FRAME_SIZE, options.heartbeat,
                                            AMQP_SASL_METHOD_PLAIN, options.user.c_str(), options.password.c_str());
  if (login.reply_type != AMQP_RESPONSE_NORMAL) {
    std::string reason = login.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION ? amqp_error_string2(login.library_error)
                                                                             : "refused by the broker";
    fail("amqp: login to " + where + " vhost " + options.vhost + " as " + options.user + " failed: " + reason);
  }
  amqp_channel_open(conn_, kChannel);
  if (const amqp_rpc_reply_t reply = amqp_get_rpc_reply(conn_); reply.reply_type != AMQP_RESPONSE_NORMAL) {
    fail("amqp: cannot open a channel on " + where);
  }
  channel_open_ = true;
}

AmqpSession::~AmqpSession() {
  if (!conn_) return;
  // Closing the channel hands every unacknowledged delivery back to its queue.
  if (channel_open_) amqp_channel_close(conn_, kChannel, AMQP_REPLY_SUCCESS);
  amqp_connection_close(conn_, AMQP_REPLY_SUCCESS);
  amqp_destroy_connection(conn_);
}

void AmqpSession::check(const amqp_rpc_reply_t& reply, std::string_view doing) const {
  const std::string what = "amqp: " + std::string(doing) + ": ";
  switch (reply.reply_type) {
    case AMQP_RESPONSE_NORMAL:
      return;
    case AMQP_RESPONSE_NONE:
      throw AmqpError(what + "no reply from the broker");
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
      throw AmqpError(what + amqp_error_string2(reply.library_error));
    case AMQP_RESPONSE_SERVER_EXCEPTION:
      if (reply.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
        const auto* close = static_cast<const amqp_channel_close_t*>(reply.reply.decoded);
        throw AmqpError(what + "channel closed by the broker: " + to_string(close->reply_text), close->reply_code);
      }
      if (reply.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
        const auto* close = static_cast<const amqp_connection_close_t*>(reply.reply.decoded);
        throw AmqpError(what + "connection closed by the broker: " + to_string(close->reply_text), close->reply_code);
      }
      throw AmqpError(what + "unexpected server method " + std::to_string(reply.reply.id));
  }
  throw AmqpError(what + "unknown reply type");
}

void AmqpSession::check_status(int status, std::string_view doing) const {
  if (status != AMQP_STATUS_OK) throw AmqpError("amqp: " + std::string(doing) + ": " + amqp_error_string2(status));
}

void AmqpSession::check_last_rpc(std::string_view doing) const { check(amqp_get_rpc_reply(conn_), doing); }

void AmqpSession::publish(const std::string& queue, const OutgoingMessage& message) {
  amqp_basic_properties_t props{};
  props._flags = AMQP_BASIC_DELIVERY_MODE_FLAG | AMQP_BASIC_CONTENT_TYPE_FLAG;
  props.delivery_mode = 2;  // persistent
  props.content_type = amqp_cstring_bytes("application/json");
  if (message.message_id) {
    props._flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
    props.message_id = to_bytes(*message.message_id);
  }
  if (message.type) {
    props._flags |= AMQP_BASIC_TYPE_FLAG;
    props.type = to_bytes(*message.type);
  }
  if (message.user_id) {
    props._flags |= AMQP_BASIC_USER_ID_FLAG;
    props.user_id = to_bytes(*message.user_id);
  }
  std::vector<amqp_table_entry_t> entries;
  entries.reserve(message.headers.size());
  for (const auto& [key, value] : message.headers) {
    amqp_table_entry_t entry{};
    entry.key = to_bytes(key);
    if (const auto* text = std::get_if<std::string>(&value)) {
      entry.value.kind = AMQP_FIELD_KIND_UTF8;
      entry.value.value.bytes = to_bytes(*text);
    } else {
      entry.value.kind = AMQP_FIELD_KIND_I64;
      entry.value.value.i64 = std::get<std::int64_t>(value);
    }
    entries.push_back(entry);
  }
  if (!entries.empty()) {
    props._flags |= AMQP_BASIC_HEADERS_FLAG;
    props.headers = amqp_table_t{static_cast<int>(entries.size()), entries.data()};
  }
  check_status(
      amqp_basic_publish(conn_, kChannel, amqp_empty_bytes, to_bytes(queue), 0, 0, &props, to_bytes(message.body)),
      "publish to " + queue);
}

std::uint32_t AmqpSession::message_count(const std::string& queue) {
  const amqp_queue_declare_ok_t* ok =
      amqp_queue_declare(conn_, kChannel, to_bytes(queue), 1, 0, 0, 0, amqp_empty_table);
  check_last_rpc("passive declare of " + queue);
  return ok->message_count;
}

std::optional<FetchedMessage> AmqpSession::get(const std::string& queue) {
  const amqp_rpc_reply_t reply = amqp_basic_get(conn_, kChannel, to_bytes(queue), 1);
  check(reply, "basic.get from " + queue);
  if (reply.reply.id == AMQP_BASIC_GET_EMPTY_METHOD) return std::nullopt;
  amqp_message_t message;
  check(amqp_read_message(conn_, kChannel, &message, 0), "read message from " + queue);
  FetchedMessage fetched;
  if (message.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
    fetched.message_id = to_string(message.properties.message_id);
  fetched.body = to_string(message.body);
  amqp_destroy_message(&message);
  return fetched;
}

}  // namespace boxcar::examples
