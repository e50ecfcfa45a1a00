// HttpServer on civetweb's C API: one request handler per endpoint, each a thin adapter
// that never lets an exception cross into C.
#include "boxcar/runtime/http_server.hpp"

#include <civetweb.h>

#include <cstring>
#include <string_view>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/redaction.hpp"
#include "civetweb_stop.hpp"

namespace boxcar {

namespace {

constexpr const char* kMetricsContentType = "text/plain; version=0.0.4; charset=utf-8";
constexpr const char* kTextContentType = "text/plain; charset=utf-8";
constexpr const char* kJsonContentType = "application/json";

/// Sends a complete response; returns `status` (civetweb's "handled" value).
int respond(mg_connection* conn, int status, const char* content_type, const std::string& body) {
  const mg_request_info* request = mg_get_request_info(conn);
  const bool head = request && request->request_method && std::strcmp(request->request_method, "HEAD") == 0;
  const std::string length = std::to_string(body.size());
  mg_response_header_start(conn, status);
  mg_response_header_add(conn, "Content-Type", content_type, -1);
  mg_response_header_add(conn, "Content-Length", length.c_str(), -1);
  mg_response_header_add(conn, "Cache-Control", "no-store", -1);
  mg_response_header_send(conn);
  if (!head && !body.empty()) mg_write(conn, body.data(), body.size());
  return status;
}

bool is_get_or_head(mg_connection* conn) {
  const mg_request_info* request = mg_get_request_info(conn);
  if (!request || !request->request_method) return false;
  return std::strcmp(request->request_method, "GET") == 0 || std::strcmp(request->request_method, "HEAD") == 0;
}

int log_message(const mg_connection*, const char* message) {
  logger("runtime")->warn("http: {}", message ? message : "");
  return 1;  // handled: civetweb prints nothing itself
}

}  // namespace

struct HttpServer::Impl {
  std::shared_ptr<Metrics> metrics;
  std::function<ReadinessReport()> readiness;
  std::function<LivenessReport()> liveness;
  mg_context* context = nullptr;
  int port = 0;

  using Endpoint = int (Impl::*)(mg_connection*);

  /// The C callback: dispatches to `endpoint`, mapping exceptions to 500.
  template <Endpoint endpoint>
  static int handle(mg_connection* conn, void* data) {
    auto* self = static_cast<Impl*>(data);
    try {
      if (!is_get_or_head(conn)) return respond(conn, 405, kTextContentType, "method not allowed\n");
      return (self->*endpoint)(conn);
    } catch (const std::exception& e) {
      logger("runtime")->error("http: request failed: {}", redact_secrets(e.what()));
    } catch (...) {
      logger("runtime")->error("http: request failed with a non-standard exception");
    }
    try {
      return respond(conn, 500, kTextContentType, "internal error\n");
    } catch (...) {
      return 500;
    }
  }

  int serve_metrics(mg_connection* conn) {
    return respond(conn, 200, kMetricsContentType, metrics ? metrics->serialize() : std::string{});
  }

  // Liveness reads heartbeats only: never the database or the broker, so it answers
  // during exactly the outages that make readiness fail.
  int serve_health(mg_connection* conn) {
    LivenessReport report;
    if (liveness) {
      try {
        report = liveness();
      } catch (const std::exception& e) {
        report = {.alive = false, .detail = "liveness check failed: " + redact_secrets(e.what())};
      }
    }
    if (report.alive) return respond(conn, 200, kTextContentType, "ok\n");
    return respond(conn, 503, kTextContentType, report.detail + "\n");
  }

  int serve_ready(mg_connection* conn) {
    ReadinessReport report{.ready = true, .checks = {}, .detail = {}};
    if (readiness) {
      try {
        report = readiness();
      } catch (const std::exception& e) {
        report = {.ready = false, .checks = {}, .detail = "readiness check failed: " + redact_secrets(e.what())};
      }
    }
    // ordered_json keeps the checks in the order the callback listed them.
    nlohmann::ordered_json body;
    body["ready"] = report.ready;
    body["checks"] = nlohmann::ordered_json::object();
    for (const auto& [name, ok] : report.checks) body["checks"][name] = ok;
    body["detail"] = report.detail;
    body["age_ms"] = report.age.count();
    body["stale"] = report.stale;
    // Replace invalid UTF-8 in names or detail instead of throwing.
    return respond(conn, report.ready ? 200 : 503, kJsonContentType,
                   body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  }
};

HttpServer::HttpServer(HttpOptions options, std::shared_ptr<Metrics> metrics,
                       std::function<ReadinessReport()> readiness, std::function<LivenessReport()> liveness)
    : impl_(std::make_unique<Impl>()) {
  impl_->metrics = std::move(metrics);
  impl_->readiness = std::move(readiness);
  impl_->liveness = std::move(liveness);
  if (options.listen.empty()) throw ConfigError("http.listen", "must not be empty");

  // No document_root: civetweb serves no files, only the handlers below.
  const char* configuration[] = {"listening_ports", options.listen.c_str(), "num_threads", "2",    "request_timeout_ms",
                                 "10000",           "enable_keep_alive",    "no",          nullptr};
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
    throw ConfigError("http.listen", "cannot serve HTTP on '" + options.listen +
                                         "': " + (error_text[0] ? error_text : "civetweb failed to start"));

  mg_set_request_handler(impl_->context, "/metrics", &Impl::handle<&Impl::serve_metrics>, impl_.get());
  mg_set_request_handler(impl_->context, "/healthz", &Impl::handle<&Impl::serve_health>, impl_.get());
  mg_set_request_handler(impl_->context, "/readyz", &Impl::handle<&Impl::serve_ready>, impl_.get());

  mg_server_port ports[4] = {};
  const int count = mg_get_server_ports(impl_->context, 4, ports);
  if (count <= 0) {
    mg_stop(impl_->context);
    impl_->context = nullptr;
    throw ConfigError("http.listen", "civetweb reports no listening port for '" + options.listen + "'");
  }
  impl_->port = ports[0].port;
  logger("runtime")->info("http: serving /metrics, /healthz, /readyz on {} (port {})", options.listen, impl_->port);
}

HttpServer::~HttpServer() {
  if (impl_ && impl_->context) detail::stop_promptly(impl_->context);
}

int HttpServer::port() const { return impl_->port; }

}  // namespace boxcar
