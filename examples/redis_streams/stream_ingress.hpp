// A Redis Streams consumer-group ingress for boxcar::Inbox: reads entries, accepts each
// read batch with Inbox::accept_many (one transaction), and acknowledges per result:
//
//   Accepted / Duplicate                    XACK
//   InboxValidationError / IDENTITY_CONFLICT XADD to <stream>:dead (code, field), then XACK,
//                                           both in one MULTI/EXEC
//   InboxStorageError (whole batch)         no XACK: the entries stay in this consumer's
//                                           pending list and are read again (ID 0) after
//                                           a backoff, or claimed by another consumer
//
// The tenant is the stream key's: each tenant writes its own stream `<prefix>:<tenant>`,
// and a Redis ACL user per tenant may write only that key (`~orders:acme`), so the key an
// entry is in authenticates its tenant. One StreamIngress reads one tenant's stream.
//
// On start (and after every Redis or storage failure) it first re-reads its own pending
// entries (XREADGROUP ... 0) and then claims entries that other, presumably dead,
// consumers left idle for longer than `claim_min_idle` (XAUTOCLAIM, Redis >= 6.2).
//
// Thread-safety: one StreamIngress per thread (it owns one Redis connection).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "boxcar/inbox/inbox.hpp"
#include "boxcar/core/backoff.hpp"
#include "redis_client.hpp"

namespace redis_streams {

struct IngressOptions {
  /// The tenant's stream `<stream_prefix>:<tenant>` and the consumer group read from;
  /// the group is created (at `$`, with MKSTREAM) when missing. Tenant ids are letters,
  /// digits, '_' and '-' (no ':', no ACL glob characters).
  std::string stream{};  // required: no default tenant
  std::string stream_prefix = "orders";
  std::string group = "boxcar-ingress";
  /// This process's consumer name in the group. Keep it stable across restarts (e.g.
  /// the host or pod name): a restarted consumer re-reads its own pending entries.
  std::string consumer_name = "ingress-1";
  /// Where rejected entries go; empty: "<stream>:dead".
  std::string dead_letter_stream{};
  /// Identity parts that the entries do not carry: the producer (source) and the
  /// logical effect (Boxcar consumer). Never change them for a running stream.
  std::string source = "orders-service";
  std::string consumer = "orders.projection.v1";
  /// Entries per XREADGROUP / XAUTOCLAIM, i.e. per accept_many transaction.
  std::size_t batch_size = 100;
  /// How long XREADGROUP blocks waiting for new entries (bounds shutdown latency too).
  std::chrono::milliseconds block{2000};
  /// Entries pending on another consumer for longer than this are claimed.
  std::chrono::milliseconds claim_min_idle{60000};
  /// How often run() looks for idle entries of other consumers.
  std::chrono::milliseconds claim_interval{30000};
  /// Delay after a storage or Redis failure before the pending entries are read again.
  boxcar::BackoffOptions backoff{.base = std::chrono::milliseconds(500), .cap = std::chrono::seconds(30)};

  std::string dead_letter() const { return dead_letter_stream.empty() ? stream + ":dead" : dead_letter_stream; }
  /// The tenant named by `stream`. @throws std::invalid_argument when `stream` is not
  ///   `<stream_prefix>:<tenant>` with a valid tenant id.
  std::string tenant() const;
};

/// `<prefix>:<tenant>`. @throws std::invalid_argument for an invalid tenant id.
std::string tenant_stream(const std::string& prefix, const std::string& tenant);

/// One stream entry as read. `deleted`: the entry is still pending but was removed from
/// the stream (XDEL / MAXLEN trimming), so its fields are gone.
struct StreamEntry {
  std::string id;
  std::vector<std::pair<std::string, std::string>> fields{};
  bool deleted = false;
};

struct IngressStats {
  std::size_t read = 0;
  std::size_t accepted = 0;
  std::size_t duplicates = 0;
  std::size_t dead_lettered = 0;
  /// Batches left unacknowledged because the inbox could not store them.
  std::size_t storage_failures = 0;

  IngressStats& operator+=(const IngressStats& other);
};

/// The AcceptRequest an entry maps to, or why it cannot be accepted at all. Exposed for
/// tests. Fields: id, type, version, data (JSON text); optional traceparent, tracestate,
/// correlation_id, causation_id, and tenant (rejected as TENANT_MISMATCH unless it is the
/// stream's tenant).
struct MappedEntry {
  std::optional<boxcar::AcceptRequest> request{};
  std::string error_code{};
  std::string error_field{};
  std::string error_message{};
};
MappedEntry map_entry(const StreamEntry& entry, const IngressOptions& options);

/// The entry field an InboxValidationError::field() refers to ("event_type" -> "type",
/// "payload/a/0" -> "data/a/0", ...), so dead letters speak the producer's vocabulary.
std::string entry_field_of(const std::string& inbox_field);

class StreamIngress {
 public:
  /// Opens no connection yet. `inbox` must outlive this object and declare
  /// options.consumer. @throws std::invalid_argument when options.stream names no tenant.
  StreamIngress(boxcar::Inbox& inbox, RedisOptions redis, IngressOptions options);
  ~StreamIngress();

  /// XGROUP CREATE <stream> <group> $ MKSTREAM; an existing group (BUSYGROUP) is fine.
  /// @throws RedisConnectionError, RedisCommandError
  void ensure_group();

  /// Re-reads and processes this consumer's own pending entries (XREADGROUP with ID 0,
  /// paging through the list). Stops at the first storage failure.
  IngressStats reclaim_own_pending();
  /// Claims and processes entries other consumers left idle >= claim_min_idle
  /// (XAUTOCLAIM). Stops at the first storage failure.
  IngressStats claim_idle();
  /// Reads at most one batch of new entries (`>`), blocking up to `block` (zero: no
  /// BLOCK), and processes it.
  IngressStats read_new(std::chrono::milliseconds block);
  /// Accepts one batch and acknowledges / dead-letters per result; on InboxStorageError
  /// acknowledges nothing and returns storage_failures = 1.
  /// @throws RedisConnectionError, RedisCommandError when acknowledging fails (the
  ///   entries then stay pending and are reconciled as duplicates on redelivery).
  IngressStats process(const std::vector<StreamEntry>& entries);

  /// --once: ensure_group, both reclaims, then new entries until none are left.
  /// Stops early (storage_failures > 0) at the first storage failure.
  /// @throws on Redis failures.
  IngressStats run_once();
  /// Runs until `stop` becomes true; Redis and storage failures back off and retry.
  IngressStats run(const std::atomic<bool>& stop);

 private:
  RedisClient& redis();
  std::vector<StreamEntry> xreadgroup(const std::string& from, std::chrono::milliseconds block);

  boxcar::Inbox& inbox_;
  RedisOptions redis_options_;
  IngressOptions options_;
  std::unique_ptr<RedisClient> client_;
};

}  // namespace redis_streams
