// The orders webhook endpoint: `POST /webhooks/orders/<tenant>` on civetweb, signed with
// Standard Webhooks, recorded with Inbox::accept() before the sender gets a 2xx.
//
// Per request: the <tenant> path segment is the key id and selects that tenant's secrets
// (unknown: 401 before reading the body) → the headers and timestamp are checked → read the
// raw body (bounded in size and time) → verify the signature over those bytes with only the
// selected secrets → parse the body strictly → accept() → answer:
//
//   202 accepted      new durable receipt              (acknowledge)
//   200 duplicate     identity already retained        (acknowledge, state untouched)
//   400 invalid       bad JSON / InboxValidationError  (reject; body names the field)
//   401 unauthorized  unknown key id, missing/bad signature, stale timestamp
//   408 timeout       body not received within body_timeout
//   409 conflict      IDENTITY_CONFLICT: same webhook-id, other content
//   413 too large     body over max_body_bytes
//   429 busy          this client address already has max_connections_per_client open
//   503 unavailable   InboxStorageError: not (certainly) recorded; Retry-After, redeliver
//
// Abuse bounds (each an option below): an unauthenticated request costs at most one HMAC
// per secret of the tenant it names; reading headers and body is capped in time; one client
// address holds at most max_connections_per_client of the `threads` workers once its
// headers are in.
//
// Thread-safety: civetweb serves requests on its own threads; the Inbox is thread-safe.
// Blocking: the constructor binds the port; the destructor waits for in-flight requests.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "signature.hpp"

namespace boxcar {
class Inbox;
}

namespace webhook {

/// The endpoint's prefix; a request names its tenant (the key id) as the one segment after it.
inline constexpr const char* kPath = "/webhooks/orders";

/// Every limit has a default meant for a server exposed behind nothing; see README.md.
struct ServerOptions {
  /// civetweb listening_ports syntax: "127.0.0.1:8080"; port 0 picks a free port.
  std::string listen = "127.0.0.1:8080";
  /// Active signing keys; each names the tenant it authenticates and is selected by that
  /// tenant in the URL (`/webhooks/orders/<tenant>`). Required.
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
  /// civetweb worker threads = connections served at once, slow ones included (civetweb
  /// gives each accepted connection a thread before reading its headers). Idle threads cost
  /// little; the number is what a population of slow clients must exceed to delay others.
  int threads = 256;
  /// The request line and headers must arrive within this, in total (civetweb's
  /// request_timeout_ms, which also bounds any single socket write).
  std::chrono::milliseconds header_timeout{5000};
  /// The whole body must arrive within this, counted from the end of the headers: 1 MiB in
  /// 10 s is a minimum average rate of ~100 KiB/s. A body still arriving is refused with 408.
  std::chrono::milliseconds body_timeout{10000};
  /// Requests one client address may have past their headers at once (reading a body,
  /// waiting for the database); over it: 429 before the body is read. 0 switches the limit
  /// off: do that behind a reverse proxy, where every request comes from the proxy's
  /// address. At most threads / 4, so one address always leaves a reserve of workers.
  int max_connections_per_client = 8;
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

  /// HMAC-SHA256 computations since start (VerifyResult::keys_tried summed): what the
  /// unauthenticated requests cost. For tests and monitoring.
  std::uint64_t hmac_count() const noexcept;
  /// Requests refused with 429 because their address was over max_connections_per_client.
  std::uint64_t refused_connections() const noexcept;
  /// Requests whose body was cut at body_timeout (408).
  std::uint64_t body_timeouts() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace webhook
