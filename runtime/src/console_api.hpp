// The console's routes (console_server.hpp lists them): a request in, a response out, with
// no civetweb in sight, so the routing, the guards and the actions are plain functions of
// the request. console_server.cpp adapts civetweb to this.
#pragma once

#include <functional>
#include <map>
#include <string>

#include "boxcar/runtime/console_server.hpp"

namespace boxcar::detail {

struct ConsoleRequest {
  std::string method;
  /// The path without the query string ("/api/v1/overview").
  std::string path;
  /// Decoded query parameters.
  std::map<std::string, std::string> query;
  /// A request header by name (case-insensitive); null when absent.
  std::function<const char*(const char*)> header;
  std::string body;
};

struct ConsoleResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

/// What the routes share: the sources, the admin token and this server's CSRF token.
struct ConsoleContext {
  ConsoleSources sources;
  std::string admin_token;
  std::string csrf_token;
  std::chrono::milliseconds refresh{5000};
};

/// Answers one request. Never throws: errors become JSON error responses
/// ({"error": {"code", "message"}}) with a 4xx or 5xx status.
ConsoleResponse handle_console_request(const ConsoleContext& context, const ConsoleRequest& request);

}  // namespace boxcar::detail
