// The webhook endpoint on civetweb's C API. The handler maps each accept() outcome to the
// status that tells a webhook sender whether to stop (2xx), give up (4xx) or redeliver (503).
#include "webhook_server.hpp"

#include <arpa/inet.h>
#include <civetweb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>
#include <variant>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/logging.hpp"
#include "body_deadlines.hpp"
#include "client_limiter.hpp"
#include "delivery.hpp"

namespace webhook {

namespace {

using Json = nlohmann::json;

struct Response {
  int status;
  Json body;
  std::vector<std::pair<std::string, std::string>> headers{};
};

Response rejection(int status, std::string code, std::string message, std::string field = {}) {
  Json body = {{"error", std::move(code)}, {"message", std::move(message)}};
  if (!field.empty()) body["field"] = std::move(field);
  return {status, std::move(body)};
}

void send(mg_connection* conn, const Response& response) {
  // Messages may quote input (e.g. a header value): never let bad UTF-8 throw here.
  const std::string body = response.body.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  const std::string length = std::to_string(body.size());
  mg_response_header_start(conn, response.status);
  mg_response_header_add(conn, "Content-Type", "application/json", -1);
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  for (const auto& [name, value] : response.headers) mg_response_header_add(conn, name.c_str(), value.c_str(), -1);
  mg_response_header_send(conn);
  mg_write(conn, body.data(), body.size());
}

std::string_view header(mg_connection* conn, const char* name) {
  const char* value = mg_get_header(conn, name);
  return value ? std::string_view(value) : std::string_view{};
}

/// The sender knows the wire names, not AcceptRequest's: report the field as it sent it.
std::string wire_field(const std::string& inbox_field) {
  if (inbox_field == "message_id") return "webhook-id";
  if (inbox_field == "event_type") return "type";
  if (inbox_field == "schema_version") return "version";
  if (inbox_field.starts_with("payload")) return "data" + inbox_field.substr(std::string_view("payload").size());
  return inbox_field;
}

int log_message(const mg_connection*, const char* message) {
  boxcar::logger("webhook")->warn("http: {}", message ? message : "");
  return 1;  // handled: civetweb prints nothing itself
}

/// mg_stop() without its wait: civetweb 1.15 sees the stop request only when its accept
/// loop's 2-second poll returns, so a connection attempt to our own port on IPv4 loopback,
/// every 10 ms until mg_stop() returns, ends that poll at once. The attempts carry no
/// request, so nothing is served. (The webhook listens on IPv4; on another address
/// mg_stop() takes its 2 s.) Boxcar's runtime does the same for its endpoint in a private
/// helper; this example, like an application, uses Boxcar's public targets only.
void stop_server(mg_context* context, int port) noexcept {
  std::atomic<bool> stopped{false};
  const auto wake = [&] {
    sockaddr_in loopback{};
    loopback.sin_family = AF_INET;
    loopback.sin_port = htons(static_cast<std::uint16_t>(port));
    loopback.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    while (!stopped.load()) {
      if (const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); fd >= 0) {
        (void)::connect(fd, reinterpret_cast<const sockaddr*>(&loopback), sizeof loopback);
        ::close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  };
  std::thread waker;
  try {
    waker = std::thread(wake);
  } catch (const std::system_error&) {
    // No thread to spare: mg_stop() takes its time.
  }
  mg_stop(context);
  stopped = true;
  if (waker.joinable()) waker.join();
}

/// The key id: the one path segment after kPath (`/webhooks/orders/<tenant>`), or empty
/// when the path has another shape.
std::string_view key_id_of(std::string_view path) {
  const std::string_view prefix = kPath;
  if (!path.starts_with(prefix) || path.size() <= prefix.size() + 1 || path[prefix.size()] != '/') return {};
  const std::string_view key_id = path.substr(prefix.size() + 1);
  return valid_key_id(key_id) ? key_id : std::string_view{};
}

/// One admitted request of a client address; leaves the ClientLimiter when it ends.
class Admission {
 public:
  Admission(ClientLimiter& limiter, std::string address)
      : limiter_(limiter), address_(std::move(address)), admitted_(limiter_.try_enter(address_)) {}
  ~Admission() {
    if (admitted_) limiter_.leave(address_);
  }
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;
  bool admitted() const noexcept { return admitted_; }

 private:
  ClientLimiter& limiter_;
  std::string address_;
  bool admitted_;
};

}  // namespace

struct Server::Impl {
  boxcar::Inbox& inbox;
  ServerOptions options;
  KeyRing keys;
  ClientLimiter limiter;
  BodyDeadlines body_deadlines;
  std::atomic<std::uint64_t> hmacs{0};
  std::atomic<std::uint64_t> refused{0};
  mg_context* context = nullptr;
  int port = 0;

  Impl(boxcar::Inbox& inbox_, ServerOptions options_)
      : inbox(inbox_),
        options(std::move(options_)),
        keys(std::move(options.keys)),  // the only copy of the secrets from here on
        limiter(static_cast<std::size_t>(options.max_connections_per_client)) {}

  /// The C callback: never lets an exception cross into civetweb.
  static int handle(mg_connection* conn, void* data) {
    auto* self = static_cast<Impl*>(data);
    try {
      const Response response = self->serve(conn);
      send(conn, response);
      return response.status;
    } catch (const std::exception& e) {
      boxcar::logger("webhook")->error("request failed: {}", e.what());
    } catch (...) {
      boxcar::logger("webhook")->error("request failed with a non-standard exception");
    }
    try {
      // Not known to be recorded: a 5xx makes the sender redeliver, which is safe.
      send(conn, rejection(500, "INTERNAL_ERROR", "internal error; retry later"));
    } catch (...) {
    }
    return 500;
  }

  Response serve(mg_connection* conn) {
    const mg_request_info* request = mg_get_request_info(conn);
    if (!request) return rejection(400, "BAD_REQUEST", "no request");
    // 0. One address may hold at most max_connections_per_client workers in this handler
    //    (reading a body, waiting for the database); over it, refuse before reading more.
    const Admission admission(limiter, request->remote_addr);
    if (!admission.admitted()) {
      ++refused;
      Response response = rejection(429, "TOO_MANY_CONNECTIONS", "too many concurrent requests from this address");
      response.headers.emplace_back("Retry-After", std::to_string(options.retry_after.count()));
      return response;
    }
    if (!request->request_method || std::strcmp(request->request_method, "POST") != 0) {
      Response response = rejection(405, "METHOD_NOT_ALLOWED", "use POST");
      response.headers.emplace_back("Allow", "POST");
      return response;
    }
    // 1. The key id in the path selects the candidate secrets: one tenant's, never all.
    const std::string_view key_id = key_id_of(request->local_uri ? request->local_uri : "");
    if (key_id.empty())
      return rejection(404, "NOT_FOUND", std::string("no such endpoint; POST ") + kPath + "/<tenant>");
    const std::span<const SigningKey> candidates = keys.keys_for(key_id);
    const VerifyInput headers{.id = header(conn, "webhook-id"),
                              .timestamp = header(conn, "webhook-timestamp"),
                              .signature = header(conn, "webhook-signature"),
                              .body = {}};
    // An unknown key id, missing headers and a stale timestamp cost neither the body read
    // nor any HMAC.
    const auto refuse = [&](std::string_view reason) {
      boxcar::log_event(*boxcar::logger("webhook"), boxcar::LogLevel::Warn, "webhook rejected",
                        {{"reason", std::string(reason)}});
      return rejection(401, "UNAUTHORIZED", std::string(reason));
    };
    if (candidates.empty()) return refuse("unknown_key_id");
    if (const auto failure = check_headers(headers, std::chrono::system_clock::now(), options.tolerance))
      return refuse(to_string(*failure));

    // 2. The raw body, bounded in size and in time: the signature covers these exact bytes.
    const Response too_large =
        rejection(413, "BODY_TOO_LARGE", "body exceeds " + std::to_string(options.max_body_bytes) + " bytes");
    if (request->content_length > static_cast<long long>(options.max_body_bytes)) return too_large;
    std::string body;
    if (request->content_length > 0) body.reserve(static_cast<std::size_t>(request->content_length));
    // A trickled body would keep one mg_read() blocked indefinitely: at the deadline the
    // watchdog cuts the connection's reading and the blocked mg_read() returns.
    const auto deadline = BodyDeadlines::Clock::now() + options.body_timeout;
    const std::uint64_t token = body_deadlines.arm({.remote_address = request->remote_addr,
                                                    .remote_port = request->remote_port,
                                                    .local_port = request->server_port},
                                                   deadline);
    struct Disarm {
      BodyDeadlines& deadlines;
      std::uint64_t token;
      ~Disarm() { deadlines.disarm(token); }
    } disarm{body_deadlines, token};
    char buffer[16 * 1024];
    for (;;) {
      const int n = mg_read(conn, buffer, sizeof buffer);
      if (n > 0) body.append(buffer, static_cast<std::size_t>(n));
      if (body.size() > options.max_body_bytes) return too_large;  // chunked body without a length
      const bool complete =
          request->content_length >= 0 ? body.size() == static_cast<std::size_t>(request->content_length) : n == 0;
      if (complete) break;
      if (BodyDeadlines::Clock::now() >= deadline)
        return rejection(408, "BODY_TIMEOUT",
                         "the body did not arrive within " + std::to_string(options.body_timeout.count()) + " ms",
                         "body");
      if (n < 0) return rejection(400, "BODY_UNREADABLE", "the request body could not be read", "body");
      if (n == 0) break;  // the sender stopped early: the signature will not match
    }

    // 3. Authenticate before parsing anything, with the selected tenant's secrets only.
    const std::string_view id = headers.id;
    VerifyInput input = headers;
    input.body = body;
    const VerifyResult verified = verify(candidates, input, std::chrono::system_clock::now(), options.tolerance);
    hmacs += verified.keys_tried;
    if (!verified.verified()) return refuse(to_string(verified.status));

    // 4. Parse strictly (delivery.hpp): bad JSON or a bad envelope is a 400 naming the field.
    auto decoded = decode_body(body, options.max_body_bytes);
    if (const auto* refused = std::get_if<BodyRejection>(&decoded))
      return rejection(400, refused->code, refused->message, refused->field);

    // 5. Record it durably; only then may the sender hear 2xx.
    const std::string tenant = verified.tenant;
    try {
      const boxcar::Receipt receipt = inbox.accept(
          accept_request(std::get<Delivery>(std::move(decoded)), tenant, id, options.source, options.consumer));
      const bool accepted = receipt.kind == boxcar::Receipt::Kind::Accepted;
      boxcar::log_event(*boxcar::logger("webhook"), boxcar::LogLevel::Info, "webhook recorded",
                        {{"tenant", tenant},
                         {"message_id", std::string(id)},
                         {"outcome", boxcar::to_string(receipt.kind)},
                         {"receipt_id", std::to_string(receipt.id)}});
      return {accepted ? 202 : 200,
              {{"result", boxcar::to_string(receipt.kind)},
               {"receipt", {{"id", receipt.id}, {"status", boxcar::to_string(receipt.status)}}}}};
    } catch (const boxcar::InboxValidationError& e) {
      Response response = rejection(400, e.code(), e.what(), wire_field(e.field()));
      response.body["inbox_field"] = e.field();
      return response;
    } catch (const boxcar::InboxConflictError& e) {
      boxcar::log_event(*boxcar::logger("webhook"), boxcar::LogLevel::Warn, "webhook identity conflict",
                        {{"tenant", tenant}, {"message_id", std::string(id)}});
      return rejection(409, e.code(), "webhook-id was already used for different content");
    } catch (const boxcar::InboxStorageError& e) {
      // Not recorded, or (uncertain) maybe recorded: either way the redelivery of the
      // same webhook-id reconciles it (Accepted if it did not land, Duplicate if it did).
      boxcar::log_event(*boxcar::logger("webhook"), boxcar::LogLevel::Error, "webhook not recorded",
                        {{"tenant", tenant}, {"message_id", std::string(id)}, {"code", e.code()}, {"error", e.what()}});
      Response response = rejection(503, e.code(), "not recorded; redeliver the same webhook-id later");
      response.headers.emplace_back("Retry-After", std::to_string(options.retry_after.count()));
      return response;
    }
  }
};

namespace {

/// Refuses limits that would not bound anything, before civetweb starts.
void check_limits(const ServerOptions& options) {
  if (options.keys.empty()) throw std::invalid_argument("webhook: no signing keys configured");
  if (options.threads < 4 || options.threads > 1024)
    throw std::invalid_argument("webhook: threads must be between 4 and 1024");
  if (options.header_timeout <= std::chrono::milliseconds::zero() || options.header_timeout > std::chrono::minutes(5))
    throw std::invalid_argument("webhook: header_timeout must be between 1 ms and 5 min");
  if (options.body_timeout <= std::chrono::milliseconds::zero() || options.body_timeout > std::chrono::minutes(5))
    throw std::invalid_argument("webhook: body_timeout must be between 1 ms and 5 min");
  // The reserve: one address may hold at most a quarter of the workers.
  if (options.max_connections_per_client < 0 || options.max_connections_per_client > options.threads / 4)
    throw std::invalid_argument("webhook: max_connections_per_client must be between 0 (off) and threads / 4");
}

}  // namespace

Server::Server(boxcar::Inbox& inbox, ServerOptions options) {
  check_limits(options);
  impl_ = std::make_unique<Impl>(inbox, std::move(options));
  const std::string threads = std::to_string(impl_->options.threads);
  const std::string request_timeout = std::to_string(impl_->options.header_timeout.count());
  // No document_root: civetweb serves no files, only the handler below. No keep-alive: a
  // connection is one request, so the per-address count is a count of requests.
  // linger_timeout_ms stays unset: close() never waits for a client that does not read.
  const char* configuration[] = {
      "listening_ports",       impl_->options.listen.c_str(), "num_threads", threads.c_str(), "request_timeout_ms",
      request_timeout.c_str(), "enable_keep_alive",           "no",          nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = &log_message;
  mg_init_data init{};
  init.callbacks = &callbacks;
  init.user_data = impl_.get();
  init.configuration_options = configuration;
  char error_text[256] = {};
  unsigned error_code = 0;
  mg_error_data error{};
  error.code = &error_code;
  error.text = error_text;
  error.text_buffer_size = sizeof error_text;
  impl_->context = mg_start2(&init, &error);
  if (!impl_->context)
    throw std::invalid_argument("webhook: cannot listen on '" + impl_->options.listen +
                                "': " + (error_text[0] ? error_text : "civetweb failed to start"));
  mg_set_request_handler(impl_->context, kPath, &Impl::handle, impl_.get());

  mg_server_port ports[4] = {};
  if (mg_get_server_ports(impl_->context, 4, ports) <= 0) {
    mg_stop(impl_->context);
    throw std::invalid_argument("webhook: civetweb reports no listening port for '" + impl_->options.listen + "'");
  }
  impl_->port = ports[0].port;
}

Server::~Server() {
  if (impl_ && impl_->context) stop_server(impl_->context, impl_->port);
}

int Server::port() const noexcept { return impl_->port; }

std::uint64_t Server::hmac_count() const noexcept { return impl_->hmacs.load(); }

std::uint64_t Server::refused_connections() const noexcept { return impl_->refused.load(); }

std::uint64_t Server::body_timeouts() const noexcept { return impl_->body_deadlines.expired(); }

}  // namespace webhook
