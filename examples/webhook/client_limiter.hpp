// Concurrent connections per client address: the cap that keeps one slow or hostile client
// from occupying every civetweb worker thread (slowloris from one address or a few).
//
// A worker thread enters the client's address when it takes a connection and leaves it when
// the connection closes; over the limit, the connection is refused instead of served.
// Memory is bounded by the connections in flight: an address's entry goes away at zero.
//
// Thread-safety: every member may be called concurrently (one mutex, held for a map lookup).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace webhook {

class ClientLimiter {
 public:
  /// `max_per_client` connections per address at once; 0 switches the limit off.
  explicit ClientLimiter(std::size_t max_per_client) : max_per_client_(max_per_client) {}

  /// Admits one more connection from `address` unless it already has max_per_client.
  /// Every admitted connection must be matched by one leave(address).
  bool try_enter(std::string_view address);
  void leave(std::string_view address);

  /// Connections admitted and not yet left for `address` (for tests and diagnostics).
  std::size_t in_flight(std::string_view address) const;

 private:
  const std::size_t max_per_client_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::size_t> in_flight_;
};

}  // namespace webhook
