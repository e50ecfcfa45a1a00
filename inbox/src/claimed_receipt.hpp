// A receipt this worker holds a claim on, as read back by a claim statement.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "boxcar/inbox/accept_request.hpp"
#include "boxcar/core/scope.hpp"

namespace boxcar::detail {

struct ClaimedReceipt {
  std::int64_t id = 0;
  std::string claim_token;
  int attempt = 0;
  Scope scope;
  std::string source;
  std::string consumer;
  std::string message_id;
  std::string event_type;
  int schema_version = 0;
  nlohmann::json payload;
  Metadata metadata;
  /// PROCESSING for a claim; what lease recovery left (RETRYABLE, PENDING, DEAD) for a
  /// row it released with a crash strike.
  std::string status;
  /// Claimed by the suspect lane: it runs alone, and its solo start is recorded first.
  bool suspect = false;
  /// Has an ordering key (docs/ordering.md): completing it moves its key on.
  bool ordered = false;
  /// The earliest the claim's lease can end, on this process's clock: the claim (or the
  /// last renewal) was sent before the database computed `now() + lease`. Claimed
  /// receipts waiting their turn have their leases renewed before it comes.
  std::chrono::steady_clock::time_point lease_until{};

  /// Reads a row of a claim statement (see worker_queries.hpp).
  static ClaimedReceipt from_row(const pqxx::row& row);
};

}  // namespace boxcar::detail
