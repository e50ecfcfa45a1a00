// boxcar::ConsoleServer — the operator console (docs/console.md): a web page and the JSON
// API under /api/v1/ that feeds it, served by civetweb (which stays out of this header)
// on a port of its own, off unless console.enabled.
//
//   GET  /, /console.css, /console.js   the page, embedded in the binary at build time
//   GET  /api/v1/session                 {"admin", "csrf_token", "refresh_ms", "schema", "actions_enabled"}
//   GET  /api/v1/overview                console_overview()
//   GET  /api/v1/dead/groups             console_dead_groups()             ?kind=inbox|outbox
//   GET  /api/v1/dead/groups/GROUP       console_group_page()              ?kind, limit, after_*
//   GET  /api/v1/dead/records/ID         console_record(); an admin also gets the payload
//                                        and metadata, redacted (redact_content())
//   GET  /api/v1/blocked-keys            console_blocked_keys()
//   GET  /api/v1/health                  database_health_document()
//   GET  /api/v1/actions                 console_actions(): the recorded actions
//   POST /api/v1/actions/preview         how many rows an action would change
//   POST /api/v1/actions/run             the action, confirmed with that number
//
// Reads go through `reads` (a pool whose role is the console role: no payloads), writes
// and an admin's payload reads through `writes` (the operator role). A POST needs the
// admin token (Authorization: Bearer), the CSRF token of GET /api/v1/session
// (X-CSRF-Token) and an Origin equal to the Host it was sent to; both tokens are compared
// in constant time and never logged. Every response carries a strict
// Content-Security-Policy; nothing is loaded from another origin.
//
// Thread-safety: civetweb serves requests on two threads of its own; the server holds no
// mutable state besides civetweb's.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "boxcar/core/connection_pool.hpp"

namespace boxcar {

struct ConsoleOptions {
  /// console.enabled: off by default. Off, the Runtime builds nothing of the console: no
  /// thread, no pool, no route, no query.
  bool enabled = false;
  /// console.port: the console's port, on the host(s) of http.listen (127.0.0.1 when
  /// http.listen is empty). 0 picks a free one.
  int port = 9465;
  /// console.admin_token: the secret that allows actions, from BOXCAR_CONSOLE_ADMIN_TOKEN
  /// or console.admin_token_file only (never a configuration file or flag). Empty: the
  /// console is read-only.
  std::string admin_token{};
  /// console.admin_token_file: a file whose content (trailing newlines dropped) is the
  /// admin token; read when the console starts.
  std::string admin_token_file{};
  /// console.database_url: the connection of the console's reads, as a user holding the
  /// console role (docs/security.md); empty: database.url.
  std::string database_url{};
  /// console.operator_url: the connection of the console's actions, as a user holding
  /// the operator role; empty: database.url.
  std::string operator_url{};
  /// console.refresh_ms: how often the page refreshes its panels.
  std::chrono::milliseconds refresh{5000};
};

/// What the console reads and writes.
struct ConsoleSources {
  std::string schema = "boxcar";
  /// The declared consumers, listed first on the overview.
  std::vector<std::string> consumers{};
  std::shared_ptr<ConnectionPool> reads{};
  std::shared_ptr<ConnectionPool> writes{};
};

/// "HOST:PORT[,...]" for the console: each address of `http_listen` (civetweb syntax)
/// with its port replaced by `port`; "127.0.0.1:PORT" when `http_listen` is empty.
std::string console_listen(const std::string& http_listen, int port);

class ConsoleServer {
 public:
  /// Reads the admin token file (when set), binds `listen` and starts serving before it
  /// returns.
  /// @throws ConfigError("console.port") when the address cannot be bound,
  ///   ConfigError("console.admin_token_file") when the file cannot be read or is empty,
  ///   ConfigError("console.pool") for a missing pool.
  ConsoleServer(ConsoleOptions options, const std::string& listen, ConsoleSources sources);
  /// Stops accepting, waits for requests in progress and joins civetweb's threads.
  ~ConsoleServer();
  ConsoleServer(const ConsoleServer&) = delete;
  ConsoleServer& operator=(const ConsoleServer&) = delete;

  /// The port actually bound (the first when several addresses are bound).
  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace boxcar
