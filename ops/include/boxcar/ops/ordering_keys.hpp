// Blocked ordering keys (docs/ordering.md): which keys of an ordered consumer are held up
// by a failing or DEAD head, and `boxcar dead unblock KEY`.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <optional>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/core/scope.hpp"
#include "boxcar/ops/record_kind.hpp"

namespace boxcar {

/// A key whose head receipt has failed at least once: RETRYABLE (still retried) or DEAD
/// under the block policy (held until an operator acts).
struct BlockedKey {
  std::string consumer{};
  /// A key belongs to one scope: the same key text of another tenant is another key
  /// (docs/ordering.md, "Keys are scoped").
  Scope scope{};
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
  Scope scope{};
  /// The DEAD receipt that no longer blocks the key (it stays DEAD and replayable).
  std::int64_t receipt_id = 0;
};

/// What `boxcar dead unblock` releases.
struct UnblockRequest {
  std::string key{};
  /// Only this consumer's key; "" = every consumer with such a key.
  std::string consumer{};
  /// Only this scope's key. Without one, the key is released when DEAD heads block it in
  /// one scope only: the same key text in several scopes is several tenants' keys, and
  /// releasing them all takes `every_scope`.
  std::optional<Scope> scope{};
  bool every_scope = false;
  /// Who releases it, recorded on each released receipt (key_released_by); required.
  std::string actor{};
  /// Finds and returns what would be released, and releases nothing (the transaction is
  /// rolled back).
  bool dry_run = false;
};

/// Releases the key of `request` from the DEAD receipt that blocks it: the key's next
/// receipt becomes claimable. Empty when no DEAD head blocks the key (a RETRYABLE head is
/// still being retried: see blocked_keys). One transaction; the released receipts record
/// when and by whom (key_released_at, key_released_by) and stay DEAD and replayable.
/// @throws OperatorError UNBLOCK_SCOPE_REQUIRED (no scope, not every_scope, and the key is
///   blocked in more than one scope: nothing was released), UNBLOCK_KEY_REQUIRED (empty
///   key), DEAD_ACTOR_REQUIRED (empty actor); ConfigError for an invalid schema name;
///   DatabaseError.
std::vector<UnblockedKey> unblock_key(ConnectionPool& pool, const std::string& schema, const UnblockRequest& request);

}  // namespace boxcar
