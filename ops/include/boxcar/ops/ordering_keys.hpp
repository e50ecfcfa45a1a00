// Blocked ordering keys (docs/ordering.md): which keys of an ordered consumer are held up
// by a failing or DEAD head, and `boxcar dead unblock KEY`.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "boxcar/core/connection_pool.hpp"

namespace boxcar {

/// A key whose head receipt has failed at least once: RETRYABLE (still retried) or DEAD
/// under the block policy (held until an operator acts).
struct BlockedKey {
  std::string consumer{};
  std::string key{};
  /// The receipt that blocks it, and its state.
  std::int64_t head_id = 0;
  std::string head_status{};
  int head_attempts = 0;
  std::string head_error_type{};
  std::string head_error{};
  /// Since the head first failed.
  std::chrono::milliseconds blocked_for{0};
  /// Receipts waiting behind the head, counted up to kBlockedKeyWaitingCap (a value
  /// above the cap means "more than the cap").
  std::int64_t waiting = 0;
};

inline constexpr std::int64_t kBlockedKeyWaitingCap = 10000;

/// The blocked keys of every consumer, longest blocked first, at most `limit`.
/// @throws ConfigError for an invalid schema name; DatabaseError.
std::vector<BlockedKey> blocked_keys(ConnectionPool& pool, const std::string& schema, std::size_t limit = 100);

struct UnblockedKey {
  std::string consumer{};
  /// The DEAD receipt that no longer blocks the key (it stays DEAD and replayable).
  std::int64_t receipt_id = 0;
};

/// Releases `key` from the DEAD receipt that blocks it, for `consumer` ("" = every
/// consumer with such a key): the key's next receipt becomes claimable. Empty when no
/// DEAD head blocks the key (a RETRYABLE head is still being retried: see blocked_keys).
/// @throws ConfigError for an invalid schema name; DatabaseError.
std::vector<UnblockedKey> unblock_key(ConnectionPool& pool, const std::string& schema, const std::string& key,
                                      const std::string& consumer = "");

}  // namespace boxcar
