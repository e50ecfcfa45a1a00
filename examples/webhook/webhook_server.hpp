// The orders webhook endpoint: `POST /webhooks/orders` on civetweb, signed with Standard
// Webhooks, recorded with Inbox::accept() before the sender gets a 2xx.
//
// Per request: read the raw body (bounded) → verify the signature over those bytes → the
// verifying key names the tenant → parse the body strictly → accept() → answer:
//
//   202 accepted      new durable receipt              (acknowledge)
//   200 duplicate     identity already retained        (acknowledge, state untouched)
//   400 invalid       bad JSON / InboxValidationError  (reject; body names the field)
//   401 unauthorized  missing/bad signature, stale timestamp
//   409 conflict      IDENTITY_CONFLICT: same webhook-id, other content
//   413 too large     body over max_body_bytes
//   503 unavailable   InboxStorageError: not (certainly) recorded; Retry-After, redeliver
//
// Thread-safety: civetweb serves requests on its own threads; the Inbox is thread-safe.
// Blocking: the constructor binds the port; the destructor waits for in-flight requests.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "signature.hpp"

namespace boxcar {
class Inbox;
}

namespace webhook {

inline constexpr const char* kPath = "/webhooks/orders";

struct ServerOptions {
  /// civetweb listening_ports syntax: "127.0.0.1:8080"; port 0 picks a free port.
  std::string listen = "127.0.0.1:8080";
  /// Active signing keys; each names the tenant it authenticates. Required.
  std::vector<SigningKey> keys{};
  /// The inbox consumer every delivery is recorded for (must be declared on the Inbox).
  std::string consumer = "orders.projection.v1";
  /// The stable source of the identity (scope + source + consumer + webhook-id).
  std::string source = "webhook:orders";
  /// Larger bodies are refused with 413 before (Content-Length) or while reading them.
  std::size_t max_body_bytes = 1024 * 1024;
  /// Accepted distance between webhook-timestamp and this server's clock.
  std::chrono::seconds tolerance = kDefaultTolerance;
  /// Retry-After sent with 503.
  std::chrono::seconds retry_after{5};
  /// civetweb worker threads (concurrent requests).
  int threads = 8;
};

class Server {
 public:
  /// Starts serving. `inbox` must outlive the server.
  /// @throws std::invalid_argument when no keys are configured or the port cannot be bound.
  Server(boxcar::Inbox& inbox, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  /// The bound port (useful with port 0).
  int port() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace webhook
