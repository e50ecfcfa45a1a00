// ConsoleServer on civetweb's C API: one handler for every path, which reads the request
// into a ConsoleRequest, lets handle_console_request() answer, and writes the response
// with the console's security headers.
#include "boxcar/runtime/console_server.hpp"

#include <civetweb.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>

#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/redaction.hpp"
#include "civetweb_stop.hpp"
#include "console_api.hpp"
#include "console_auth.hpp"

namespace boxcar {
namespace {

// A JSON action body is a few hundred bytes; anything much larger is not the page's.
constexpr long long kMaxBody = 64 * 1024;

// default-src 'self' and nothing inline: the page's script and style are files of this
// server, and no other origin may be fetched, framed or posted to.
constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

int send(mg_connection* conn, const detail::ConsoleResponse& response, bool head) {
  const std::string length = std::to_string(response.body.size());
  mg_response_header_start(conn, response.status);
  mg_response_header_add(conn, "Content-Type", response.content_type.c_str(), -1);
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_add(conn, "Content-Security-Policy", kContentSecurityPolicy, -1);
  mg_response_header_add(conn, "X-Content-Type-Options", "nosniff", -1);
  mg_response_header_add(conn, "X-Frame-Options", "DENY", -1);
  mg_response_header_add(conn, "Referrer-Policy", "no-referrer", -1);
  mg_response_header_add(conn, "Cross-Origin-Resource-Policy", "same-origin", -1);
  mg_response_header_send(conn);
  if (!head && !response.body.empty()) mg_write(conn, response.body.data(), response.body.size());
  return response.status;
}

std::map<std::string, std::string> parse_query(const char* query) {
  std::map<std::string, std::string> out;
  if (query == nullptr) return out;
  std::stringstream in(query);
  std::string pair;
  while (std::getline(in, pair, '&')) {
    if (pair.empty()) continue;
    const auto eq = pair.find('=');
    const std::string raw_name = pair.substr(0, eq);
    const std::string raw_value = eq == std::string::npos ? "" : pair.substr(eq + 1);
    std::string name(raw_name.size() + 1, '\0');
    std::string value(raw_value.size() + 1, '\0');
    const int name_length = mg_url_decode(raw_name.c_str(), static_cast<int>(raw_name.size()), name.data(),
                                          static_cast<int>(name.size()), 1);
    const int value_length = mg_url_decode(raw_value.c_str(), static_cast<int>(raw_value.size()), value.data(),
                                           static_cast<int>(value.size()), 1);
    if (name_length < 0 || value_length < 0) continue;
    name.resize(static_cast<std::size_t>(name_length));
    value.resize(static_cast<std::size_t>(value_length));
    out[name] = value;
  }
  return out;
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("console.admin_token_file", "cannot read '" + path + "'");
  std::string token{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) throw ConfigError("console.admin_token_file", "'" + path + "' is empty");
  return token;
}

int log_message(const mg_connection*, const char* message) {
  logger("runtime")->warn("console http: {}", message ? message : "");
  return 1;
}

}  // namespace

std::string console_listen(const std::string& http_listen, int port) {
  const std::string port_text = std::to_string(port);
  if (http_listen.empty()) return "127.0.0.1:" + port_text;
  std::string out;
  std::stringstream in(http_listen);
  std::string address;
  while (std::getline(in, address, ',')) {
    // "HOST:PORT", "[::1]:PORT" or a bare "PORT" (every interface, as /metrics).
    const auto colon = address.rfind(':');
    const auto bracket = address.rfind(']');
    const bool has_host = colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
    out += (out.empty() ? "" : ",") + (has_host ? address.substr(0, colon + 1) : std::string()) + port_text;
  }
  return out;
}

struct ConsoleServer::Impl {
  detail::ConsoleContext context;
  mg_context* server = nullptr;
  int port = 0;

  static int handle(mg_connection* conn, void* data) {
    const auto* self = static_cast<const Impl*>(data);
    const mg_request_info* info = mg_get_request_info(conn);
    const bool head = info && info->request_method && std::strcmp(info->request_method, "HEAD") == 0;
    try {
      detail::ConsoleRequest request;
      request.method = info && info->request_method ? info->request_method : "";
      request.path = info && info->local_uri ? info->local_uri : "/";
      request.query = parse_query(info ? info->query_string : nullptr);
      request.header = [conn](const char* name) { return mg_get_header(conn, name); };
      if (request.method == "POST") {
        const long long length = info ? info->content_length : -1;
        if (length < 0 || length > kMaxBody)
          return send(conn,
                      {413, "application/json", R"({"error":{"code":"BODY_TOO_LARGE","message":"at most 64 KiB"}})"},
                      false);
        request.body.resize(static_cast<std::size_t>(length));
        std::size_t got = 0;
        while (got < request.body.size()) {
          const int n = mg_read(conn, request.body.data() + got, request.body.size() - got);
          if (n <= 0) break;
          got += static_cast<std::size_t>(n);
        }
        request.body.resize(got);
      }
      return send(conn, detail::handle_console_request(self->context, request), head);
    } catch (const std::exception& e) {
      logger("runtime")->error("console: request failed: {}", redact_secrets(e.what()));
    } catch (...) {
      logger("runtime")->error("console: request failed with a non-standard exception");
    }
    try {
      return send(conn, {500, "text/plain; charset=utf-8", "internal error\n"}, head);
    } catch (...) {
      return 500;
    }
  }
};

ConsoleServer::ConsoleServer(ConsoleOptions options, const std::string& listen, ConsoleSources sources)
    : impl_(std::make_unique<Impl>()) {
  if (!sources.reads || !sources.writes) throw ConfigError("console.pool", "the console needs its two pools");
  impl_->context.sources = std::move(sources);
  impl_->context.admin_token =
      options.admin_token_file.empty() ? options.admin_token : read_token_file(options.admin_token_file);
  impl_->context.csrf_token = detail::random_hex_token(32);
  impl_->context.refresh = options.refresh;

  // No document_root: civetweb serves no files, only the handler below.
  const char* configuration[] = {"listening_ports", listen.c_str(),      "num_threads", "2",    "request_timeout_ms",
                                 "30000",           "enable_keep_alive", "no",          nullptr};
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
  impl_->server = mg_start2(&init, &error);
  if (!impl_->server)
    throw ConfigError("console.port", "cannot serve the console on '" + listen +
                                          "': " + (error_text[0] ? error_text : "civetweb failed to start"));
  mg_set_request_handler(impl_->server, "/", &Impl::handle, impl_.get());

  mg_server_port ports[4] = {};
  const int count = mg_get_server_ports(impl_->server, 4, ports);
  if (count <= 0) {
    mg_stop(impl_->server);
    impl_->server = nullptr;
    throw ConfigError("console.port", "civetweb reports no listening port for '" + listen + "'");
  }
  impl_->port = ports[0].port;
  logger("runtime")->info("console: serving on {} (port {}), actions {}", listen, impl_->port,
                          impl_->context.admin_token.empty() ? "disabled (no admin token)" : "enabled");
}

ConsoleServer::~ConsoleServer() {
  if (impl_ && impl_->server) detail::stop_promptly(impl_->server);
}

int ConsoleServer::port() const { return impl_->port; }

}  // namespace boxcar
