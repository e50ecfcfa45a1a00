#include "ingress.hpp"

#include <charconv>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <thread>

#include <spdlog/spdlog.h>

#include "boxcar/core/logging.hpp"

namespace boxcar::examples {
namespace {

using Clock = std::chrono::steady_clock;

/// A delivery this ingress cannot turn into an AcceptRequest at all (the body is not
/// JSON, a header has the wrong type). Like InboxValidationError, redelivering it cannot
/// help, so it is dead-lettered.
class InvalidDelivery final : public std::runtime_error {
 public:
  InvalidDelivery(std::string code, const std::string& message) : std::runtime_error(message), code_(std::move(code)) {}
  const std::string& code() const noexcept { return code_; }

 private:
  std::string code_;
};

const amqp_field_value_t* find_header(const amqp_basic_properties_t& props, std::string_view key) {
  if (!(props._flags & AMQP_BASIC_HEADERS_FLAG)) return nullptr;
  for (int i = 0; i < props.headers.num_entries; ++i) {
    const amqp_table_entry_t& entry = props.headers.entries[i];
    if (to_string(entry.key) == key) return &entry.value;
  }
  return nullptr;
}

/// A text header; empty when absent (accept() then names the missing field).
std::string text_header(const amqp_basic_properties_t& props, std::string_view key) {
  const amqp_field_value_t* value = find_header(props, key);
  if (!value) return {};
  if (value->kind == AMQP_FIELD_KIND_UTF8 || value->kind == AMQP_FIELD_KIND_BYTES) return to_string(value->value.bytes);
  throw InvalidDelivery("AMQP_HEADER_INVALID", "header " + std::string(key) + " must be a string");
}

/// The `schema-version` header as an integer field or decimal text; 0 when absent, which
/// accept() rejects as INBOX_SCHEMA_VERSION_INVALID.
int schema_version_header(const amqp_basic_properties_t& props) {
  const amqp_field_value_t* value = find_header(props, "schema-version");
  if (!value) return 0;
  long long number = 0;
  switch (value->kind) {
    case AMQP_FIELD_KIND_I8:
      number = value->value.i8;
      break;
    case AMQP_FIELD_KIND_U8:
      number = value->value.u8;
      break;
    case AMQP_FIELD_KIND_I16:
      number = value->value.i16;
      break;
    case AMQP_FIELD_KIND_U16:
      number = value->value.u16;
      break;
    case AMQP_FIELD_KIND_I32:
      number = value->value.i32;
      break;
    case AMQP_FIELD_KIND_U32:
      number = value->value.u32;
      break;
    case AMQP_FIELD_KIND_I64:
      number = value->value.i64;
      break;
    case AMQP_FIELD_KIND_U64:
      number = value->value.u64 > static_cast<std::uint64_t>(std::numeric_limits<int>::max())
                   ? -1
                   : static_cast<long long>(value->value.u64);
      break;
    case AMQP_FIELD_KIND_UTF8:
    case AMQP_FIELD_KIND_BYTES: {
      const std::string text = to_string(value->value.bytes);
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
      if (error != std::errc() || end != text.data() + text.size() || text.empty()) number = -1;
      break;
    }
    default:
      number = -1;
  }
  if (number < 0 || number > std::numeric_limits<int>::max()) {
    throw InvalidDelivery("AMQP_HEADER_INVALID", "header schema-version must be a non-negative integer");
  }
  return static_cast<int>(number);
}

/// The tenant of a delivery: its user_id property, which RabbitMQ validates against the
/// user the publisher authenticated as (a publish with another user_id is refused with
/// 406 PRECONDITION_FAILED). Each tenant publishes as its own broker user, named after
/// the tenant. Headers are never trusted for it; a `tenant` header that disagrees is
/// rejected as a forgery or a producer bug.
std::string tenant_of(const amqp_basic_properties_t& props) {
  if (!(props._flags & AMQP_BASIC_USER_ID_FLAG) || props.user_id.len == 0) {
    throw InvalidDelivery("AMQP_USER_ID_MISSING",
                          "the user_id property is missing: the tenant is the broker-validated publishing user");
  }
  std::string tenant = to_string(props.user_id);
  if (find_header(props, "tenant") && text_header(props, "tenant") != tenant) {
    throw InvalidDelivery("TENANT_MISMATCH", "header tenant names another tenant than the publishing user");
  }
  return tenant;
}

/// Maps one delivery onto the Inbox request. Identity: the message_id property (the
/// producer's event id, unchanged on every redelivery; never the delivery tag), or a
/// `message-id` header for producers that cannot set properties.
AcceptRequest to_accept_request(const amqp_envelope_t& envelope, const IngressOptions& options) {
  const amqp_basic_properties_t& props = envelope.message.properties;
  AcceptRequest request{
      .scope = Scope::tenant(tenant_of(props)),
      .source = options.source,
      .consumer = options.consumer,
      .message_id =
          (props._flags & AMQP_BASIC_MESSAGE_ID_FLAG) ? to_string(props.message_id) : text_header(props, "message-id"),
      .event_type = (props._flags & AMQP_BASIC_TYPE_FLAG) ? to_string(props.type) : text_header(props, "type"),
      .schema_version = schema_version_header(props),
      .payload = {},
      .metadata = {.traceparent = text_header(props, "traceparent"),
                   .tracestate = text_header(props, "tracestate"),
                   .correlation_id = (props._flags & AMQP_BASIC_CORRELATION_ID_FLAG) ? to_string(props.correlation_id)
                                                                                     : std::string()},
  };
  try {
    request.payload = nlohmann::json::parse(to_string(envelope.message.body));
  } catch (const nlohmann::json::exception& e) {
    throw InvalidDelivery("BODY_NOT_JSON", std::string("body is not JSON: ") + e.what());
  }
  return request;
}

/// Frees a consumed envelope (its properties and body) at the end of the iteration.
struct EnvelopeGuard {
  explicit EnvelopeGuard(amqp_envelope_t* e) : envelope(e) {}
  amqp_envelope_t* envelope;
  EnvelopeGuard(const EnvelopeGuard&) = delete;
  EnvelopeGuard& operator=(const EnvelopeGuard&) = delete;
  ~EnvelopeGuard() { amqp_destroy_envelope(envelope); }
};

/// libpq messages span lines; a log event is one line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\t') c = ' ';
  }
  while (!text.empty() && text.back() == ' ') text.pop_back();
  return text;
}

void sleep_unless_stopped(std::chrono::milliseconds delay, const std::atomic<bool>& stop) {
  const auto until = Clock::now() + delay;
  while (!stop.load() && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

/// Handles a frame that amqp_consume_message() did not expect: the broker closing the
/// channel or connection, or cancelling the consumer (its queue was deleted).
void handle_unexpected_frame(AmqpSession& session) {
  amqp_frame_t frame;
  session.check_status(amqp_simple_wait_frame(session.state(), &frame), "wait for a frame");
  if (frame.frame_type != AMQP_FRAME_METHOD) return;
  switch (frame.payload.method.id) {
    case AMQP_CHANNEL_CLOSE_METHOD: {
      const auto* close = static_cast<const amqp_channel_close_t*>(frame.payload.method.decoded);
      throw AmqpError("amqp: channel closed by the broker: " + to_string(close->reply_text), close->reply_code);
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
      const auto* close = static_cast<const amqp_connection_close_t*>(frame.payload.method.decoded);
      throw AmqpError("amqp: connection closed by the broker: " + to_string(close->reply_text), close->reply_code);
    }
    case AMQP_BASIC_CANCEL_METHOD:
      throw AmqpError("amqp: the broker cancelled the consumer (was the queue deleted?)");
    default:
      return;
  }
}

std::string env_or(const char* name, std::string fallback) {
  const char* value = std::getenv(name);
  return value && *value ? std::string(value) : std::move(fallback);
}

long parse_number(const std::string& text, const char* name, long min, long max) {
  long number = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
  if (error != std::errc() || end != text.data() + text.size() || number < min || number > max) {
    throw std::invalid_argument(std::string(name) + " must be an integer in [" + std::to_string(min) + ", " +
                                std::to_string(max) + "], got '" + text + "'");
  }
  return number;
}

}  // namespace

void declare_topology(AmqpSession& session, const IngressOptions& options) {
  amqp_connection_state_t conn = session.state();
  const std::string dlx = options.dead_letter_exchange();
  const std::string dlq = options.dead_letter_queue();
  amqp_exchange_declare(conn, AmqpSession::kChannel, to_bytes(dlx), amqp_cstring_bytes("fanout"), 0, 1, 0, 0,
                        amqp_empty_table);
  session.check_last_rpc("declare exchange " + dlx);
  amqp_queue_declare(conn, AmqpSession::kChannel, to_bytes(dlq), 0, 1, 0, 0, amqp_empty_table);
  session.check_last_rpc("declare queue " + dlq);
  amqp_queue_bind(conn, AmqpSession::kChannel, to_bytes(dlq), to_bytes(dlx), amqp_empty_bytes, amqp_empty_table);
  session.check_last_rpc("bind " + dlq + " to " + dlx);

  // basic.reject(requeue=false) on this queue republishes the message to the DLX with an
  // x-death header (reason "rejected"); nothing is retried in a tight loop.
  amqp_table_entry_t dead_letter{};
  dead_letter.key = amqp_cstring_bytes("x-dead-letter-exchange");
  dead_letter.value.kind = AMQP_FIELD_KIND_UTF8;
  dead_letter.value.value.bytes = to_bytes(dlx);
  const amqp_table_t arguments{1, &dead_letter};
  amqp_queue_declare(conn, AmqpSession::kChannel, to_bytes(options.queue), 0, 1, 0, 0, arguments);
  session.check_last_rpc("declare queue " + options.queue);
}

IngressStats run_ingress(Inbox& inbox, const IngressOptions& options, const std::atomic<bool>& stop) {
  auto log = logger("rabbitmq");
  AmqpSession session(options.amqp);
  amqp_connection_state_t conn = session.state();
  declare_topology(session, options);
  amqp_basic_qos(conn, AmqpSession::kChannel, 0, options.prefetch, 0);
  session.check_last_rpc("basic.qos");
  amqp_basic_consume(conn, AmqpSession::kChannel, to_bytes(options.queue), amqp_empty_bytes, 0, /*no_ack=*/0, 0,
                     amqp_empty_table);
  session.check_last_rpc("basic.consume " + options.queue);
  log_event(*log, LogLevel::Info, "consuming",
            {{"queue", options.queue},
             {"consumer", options.consumer},
             {"prefetch", std::to_string(options.prefetch)},
             {"dead_letter_queue", options.dead_letter_queue()}});

  IngressStats stats;
  int storage_failures = 0;  // consecutive; sets the nack backoff
  auto last_delivery = Clock::now();
  while (!stop.load()) {
    amqp_maybe_release_buffers(conn);
    amqp_envelope_t envelope;
    timeval poll{0, 200000};  // wake up regularly to notice `stop` and the idle limit
    const amqp_rpc_reply_t reply = amqp_consume_message(conn, &envelope, &poll, 0);
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_TIMEOUT) {
      if (options.until_idle && Clock::now() - last_delivery >= *options.until_idle) break;
      continue;
    }
    if (reply.reply_type == AMQP_RESPONSE_LIBRARY_EXCEPTION && reply.library_error == AMQP_STATUS_UNEXPECTED_STATE) {
      handle_unexpected_frame(session);
      continue;
    }
    session.check(reply, "consume from " + options.queue);
    const EnvelopeGuard guard{&envelope};
    last_delivery = Clock::now();

    const std::uint64_t tag = envelope.delivery_tag;
    const std::string message_id = (envelope.message.properties._flags & AMQP_BASIC_MESSAGE_ID_FLAG)
                                       ? to_string(envelope.message.properties.message_id)
                                       : std::string("(none)");
    const std::string redelivered = envelope.redelivered ? "true" : "false";
    // Every outcome settles the delivery exactly once: ack, reject or nack.
    const auto reject = [&](const std::string& code, const std::string& reason) {
      log_event(*log, LogLevel::Warn, "dead-lettered delivery",
                {{"queue", options.queue},
                 {"message_id", message_id},
                 {"redelivered", redelivered},
                 {"code", code},
                 {"reason", reason},
                 {"dead_letter_exchange", options.dead_letter_exchange()}});
      session.check_status(amqp_basic_reject(conn, AmqpSession::kChannel, tag, /*requeue=*/0), "basic.reject");
      ++stats.rejected;
    };
    try {
      const AcceptRequest request = to_accept_request(envelope, options);
      const Receipt receipt = inbox.accept(request);
      // Durable now: acknowledging can no longer lose the message. A Duplicate is acked
      // too, without touching the retained record (even a DEAD one).
      session.check_status(amqp_basic_ack(conn, AmqpSession::kChannel, tag, 0), "basic.ack");
      storage_failures = 0;
      (receipt.kind == Receipt::Kind::Accepted ? stats.accepted : stats.duplicates) += 1;
      log_event(*log, LogLevel::Debug, "acknowledged delivery",
                {{"message_id", message_id},
                 {"outcome", to_string(receipt.kind)},
                 {"receipt_id", std::to_string(receipt.id)},
                 {"status", to_string(receipt.status)}});
      continue;
    } catch (const InvalidDelivery& e) {
      reject(e.code(), one_line(e.what()));
    } catch (const InboxValidationError& e) {
      reject(e.code(), one_line(e.what()));
    } catch (const InboxConflictError& e) {
      // The identity was reused for other content; the stored record stays as it is.
      reject(e.code(), "identity already retained as receipt " + std::to_string(e.existing_id()) +
                           " with a different fingerprint");
    } catch (const InboxStorageError& e) {
      // Not durable (or unknown if durable): hand it back for redelivery of the same
      // identity, which accept() will reconcile (Duplicate if the write did commit).
      const auto delay = backoff_delay(options.storage_backoff, ++storage_failures);
      log_event(*log, LogLevel::Error, "storage failure; requeueing delivery",
                {{"message_id", message_id},
                 {"code", e.code()},
                 {"uncertain", e.uncertain() ? "true" : "false"},
                 {"backoff_ms", std::to_string(delay.count())},
                 {"error", one_line(e.what())}});
      sleep_unless_stopped(delay, stop);
      session.check_status(amqp_basic_nack(conn, AmqpSession::kChannel, tag, 0, /*requeue=*/1), "basic.nack");
      ++stats.requeued;
    } catch (const AmqpError&) {
      throw;  // the broker connection itself failed: nothing can be settled any more
    } catch (const std::exception& e) {
      // Anything unforeseen is treated like an uncertain storage failure: the safe side
      // is a redelivery, never an acknowledgement or a dead letter.
      const auto delay = backoff_delay(options.storage_backoff, ++storage_failures);
      log_event(
          *log, LogLevel::Error, "unexpected error; requeueing delivery",
          {{"message_id", message_id}, {"backoff_ms", std::to_string(delay.count())}, {"error", one_line(e.what())}});
      sleep_unless_stopped(delay, stop);
      session.check_status(amqp_basic_nack(conn, AmqpSession::kChannel, tag, 0, /*requeue=*/1), "basic.nack");
      ++stats.requeued;
    }
  }
  log_event(*log, LogLevel::Info, "stopped consuming",
            {{"queue", options.queue},
             {"accepted", std::to_string(stats.accepted)},
             {"duplicates", std::to_string(stats.duplicates)},
             {"dead_lettered", std::to_string(stats.rejected)},
             {"requeued", std::to_string(stats.requeued)}});
  return stats;
}

IngressOptions ingress_options_from_env() {
  IngressOptions options;
  options.amqp.host = env_or("RABBITMQ_HOST", options.amqp.host);
  options.amqp.port = static_cast<int>(parse_number(env_or("RABBITMQ_PORT", "5672"), "RABBITMQ_PORT", 1, 65535));
  options.amqp.user = env_or("RABBITMQ_USER", options.amqp.user);
  options.amqp.password = env_or("RABBITMQ_PASSWORD", options.amqp.password);
  options.amqp.vhost = env_or("RABBITMQ_VHOST", options.amqp.vhost);
  options.queue = env_or("RABBITMQ_QUEUE", options.queue);
  options.prefetch = static_cast<std::uint16_t>(
      parse_number(env_or("RABBITMQ_PREFETCH", std::to_string(options.prefetch)), "RABBITMQ_PREFETCH", 1, 65535));
  options.consumer = env_or("BOXCAR_CONSUMER", options.consumer);
  options.source = env_or("BOXCAR_SOURCE", options.source);
  return options;
}

}  // namespace boxcar::examples
