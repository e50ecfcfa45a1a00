// The webhook endpoint on civetweb's C API. The handler maps each accept() outcome to the
// status that tells a webhook sender whether to stop (2xx), give up (4xx) or redeliver (503).
#include "webhook_server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <civetweb.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string_view>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/canonical_json.hpp"
#include "boxcar/core/logging.hpp"
#include "client_limiter.hpp"

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

/// The key id: the one path segment after kPath (`/webhooks/orders/<tenant>`), or empty
/// when the path has another shape.
std::string_view key_id_of(std::string_view path) {
  const std::string_view prefix = kPath;
  if (!path.starts_with(prefix) || path.size() <= prefix.size() + 1 || path[prefix.size()] != '/') return {};
  const std::string_view key_id = path.substr(prefix.size() + 1);
  return valid_key_id(key_id) ? key_id : std::string_view{};
}

bool same_address(const sockaddr_storage& socket_address, const std::string& text, int port) {
  if (socket_address.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(socket_address);
    in_addr parsed{};
    return inet_pton(AF_INET, text.c_str(), &parsed) == 1 && ntohs(in.sin_port) == port &&
           std::memcmp(&parsed, &in.sin_addr, sizeof parsed) == 0;
  }
  if (socket_address.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(socket_address);
    in6_addr parsed{};
    return inet_pton(AF_INET6, text.c_str(), &parsed) == 1 && ntohs(in6.sin6_port) == port &&
           std::memcmp(&parsed, &in6.sin6_addr, sizeof parsed) == 0;
  }
  return false;
}

int local_port(const sockaddr_storage& socket_address) {
  if (socket_address.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(socket_address).sin_port);
  if (socket_address.ss_family == AF_INET6)
    return ntohs(reinterpret_cast<const sockaddr_in6&>(socket_address).sin6_port);
  return -1;
}

/// Ends a connection that civetweb has handed to a worker but not yet read from.
///
/// Why this way: civetweb 1.15 has no hook between accept() and the worker's header read,
/// and no API that returns a connection's socket; a refused connection would otherwise hold
/// its worker until header_timeout. Its socket is the one descriptor of this process whose
/// peer is (remote_addr, remote_port) and whose local port is server_port: a live TCP
/// connection's address pair is unique. shutdown() (never close(): civetweb owns the
/// descriptor) makes the worker's pending read fail at once, and civetweb closes the socket
/// itself. Only connections already over their address's limit pay for the scan.
bool shut_down_connection(const mg_request_info& info) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    const int fd = std::atoi(entry.path().filename().c_str());
    sockaddr_storage peer{}, local{};
    socklen_t peer_length = sizeof peer, local_length = sizeof local;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) continue;
    if (!same_address(peer, info.remote_addr, info.remote_port)) continue;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) continue;
    if (local_port(local) != info.server_port) continue;
    return ::shutdown(fd, SHUT_RDWR) == 0;
  }
  return false;
}

/// What init_connection learned about a connection; civetweb keeps it as the connection's
/// user data until connection_close.
struct ConnectionSlot {
  std::string address;
  bool admitted = false;
};

}  // namespace

struct Server::Impl {
  boxcar::Inbox& inbox;
  ServerOptions options;
  KeyRing keys;
  ClientLimiter limiter;
  std::atomic<std::uint64_t> hmacs{0};
  std::atomic<std::uint64_t> refused{0};
  mg_context* context = nullptr;
  int port = 0;

  Impl(boxcar::Inbox& inbox_, ServerOptions options_)
      : inbox(inbox_),
        options(std::move(options_)),
        keys(options.keys),
        limiter(static_cast<std::size_t>(options.max_connections_per_client)) {}

  /// civetweb calls this on the worker thread that took a new connection, before it reads
  /// the request: the place to count the connection against its address.
  static int init_connection(const mg_connection* conn, void** conn_data) {
    *conn_data = nullptr;
    try {
      auto* self = static_cast<Impl*>(mg_get_user_data(mg_get_context(conn)));
      const mg_request_info* info = mg_get_request_info(conn);
      if (!self || !info) return 0;
      auto slot = std::make_unique<ConnectionSlot>(ConnectionSlot{.address = info->remote_addr});
      slot->admitted = self->limiter.try_enter(slot->address);
      if (!slot->admitted) {
        ++self->refused;
        // If the socket cannot be found, the handler still answers 429 after the headers.
        shut_down_connection(*info);
      }
      *conn_data = slot.release();
    } catch (...) {
      // No slot: the connection is served without being counted (only on bad_alloc).
    }
    return 0;
  }

  static void connection_close(const mg_connection* conn) {
    auto* slot = static_cast<ConnectionSlot*>(mg_get_user_connection_data(conn));
    if (!slot) return;
    if (slot->admitted)
      if (auto* self = static_cast<Impl*>(mg_get_user_data(mg_get_context(conn)))) self->limiter.leave(slot->address);
    delete slot;
  }

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
    // 0. Over its address's limit (and not already cut off in init_connection): refuse
    //    before reading anything more.
    if (const auto* slot = static_cast<const ConnectionSlot*>(mg_get_user_connection_data(conn));
        slot && !slot->admitted) {
      Response response = rejection(429, "TOO_MANY_CONNECTIONS", "too many concurrent requests from this address");
      response.headers.emplace_back("Retry-After", std::to_string(options.retry_after.count()));
      return response;
    }
    const mg_request_info* request = mg_get_request_info(conn);
    if (!request || !request->request_method || std::strcmp(request->request_method, "POST") != 0) {
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
    // One mg_read waits at most header_timeout (civetweb's request_timeout_ms), so a client
    // trickling its body holds this thread for at most body_timeout + header_timeout.
    const auto deadline = std::chrono::steady_clock::now() + options.body_timeout;
    char buffer[16 * 1024];
    for (;;) {
      const int n = mg_read(conn, buffer, sizeof buffer);
      if (n < 0) return rejection(400, "BODY_UNREADABLE", "the request body could not be read", "body");
      if (n == 0) break;
      body.append(buffer, static_cast<std::size_t>(n));
      if (body.size() > options.max_body_bytes) return too_large;  // chunked body without a length
      if (std::chrono::steady_clock::now() > deadline &&
          !(request->content_length >= 0 && body.size() == static_cast<std::size_t>(request->content_length)))
        return rejection(408, "BODY_TIMEOUT",
                         "the body did not arrive within " + std::to_string(options.body_timeout.count()) + " ms",
                         "body");
    }

    // 3. Authenticate before parsing anything, with the selected tenant's secrets only.
    const std::string_view id = headers.id;
    VerifyInput input = headers;
    input.body = body;
    const VerifyResult verified = verify(candidates, input, std::chrono::system_clock::now(), options.tolerance);
    hmacs += verified.keys_tried;
    if (!verified.verified()) return refuse(to_string(verified.status));

    // 4. Parse strictly: duplicate member names, non-finite or unsafe numbers, bad
    //    UTF-8 and hostile depth are refused (boxcar::canonicalize_text) instead of being
    //    silently resolved by a lenient parser. The canonical text then parses safely.
    Json event;
    try {
      event = Json::parse(boxcar::canonicalize_text(
          body, {.max_depth = boxcar::CanonicalLimits{}.max_depth + 1, .max_bytes = 2 * options.max_body_bytes}));
    } catch (const boxcar::JsonValueError& e) {
      return rejection(400, e.code(), e.what(), "body" + e.path());
    }
    if (!event.is_object()) return rejection(400, "INVALID_BODY", "the body must be a JSON object", "body");
    const auto type = event.find("type");
    if (type == event.end()) return rejection(400, "INBOX_FIELD_REQUIRED", "'type' is required", "type");
    if (!type->is_string()) return rejection(400, "INBOX_FIELD_INVALID", "'type' must be a string", "type");
    int version = 1;
    if (const auto v = event.find("version"); v != event.end()) {
      if (!v->is_number_integer() || v->get<std::int64_t>() < std::numeric_limits<int>::min() ||
          v->get<std::int64_t>() > std::numeric_limits<int>::max())
        return rejection(400, "INBOX_SCHEMA_VERSION_INVALID", "'version' must be an integer", "version");
      version = static_cast<int>(v->get<std::int64_t>());
    }
    const auto data = event.find("data");
    if (data == event.end()) return rejection(400, "INBOX_FIELD_REQUIRED", "'data' is required", "data");

    // 5. Record it durably; only then may the sender hear 2xx.
    const std::string tenant = verified.tenant;
    try {
      const boxcar::Receipt receipt = inbox.accept({
          .scope = boxcar::Scope::tenant(tenant),  // from the verifying key, never from the body
          .source = options.source,
          .consumer = options.consumer,
          .message_id = std::string(id),
          .event_type = type->get<std::string>(),
          .schema_version = version,
          .payload = *data,
      });
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
  const char* configuration[] = {"listening_ports",
                                 impl_->options.listen.c_str(),
                                 "num_threads",
                                 threads.c_str(),
                                 "request_timeout_ms",
                                 request_timeout.c_str(),
                                 "enable_keep_alive",
                                 "no",
                                 nullptr};
  mg_callbacks callbacks{};
  callbacks.log_message = &log_message;
  callbacks.init_connection = &Impl::init_connection;
  callbacks.connection_close = &Impl::connection_close;
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
  if (impl_ && impl_->context) mg_stop(impl_->context);
}

int Server::port() const noexcept { return impl_->port; }

std::uint64_t Server::hmac_count() const noexcept { return impl_->hmacs.load(); }

std::uint64_t Server::refused_connections() const noexcept { return impl_->refused.load(); }

}  // namespace webhook
