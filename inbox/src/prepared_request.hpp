// Validation of an AcceptRequest into the exact values that are stored and compared.
#pragma once

#include <string>
#include <unordered_set>

#include "boxcar/inbox/accept_request.hpp"
#include "boxcar/core/canonical_json.hpp"

namespace boxcar::detail {

/// Longest identity component, source, consumer, message id, scope id or event type,
/// in bytes. Matches the table's CHECK constraints and stays far below the b-tree row
/// limit of the identity index.
inline constexpr std::size_t kMaxIdentityBytes = 512;

struct PreparedRequest {
  std::string scope_kind;
  std::string scope_id;
  std::string source;
  std::string consumer;
  std::string message_id;
  std::string event_type;
  int schema_version = 0;
  std::string canonical_payload;
  std::string metadata_json;
  std::string fingerprint;

  /// The identity as one string, for grouping repeats inside a batch.
  std::string identity_key() const;
};

struct AcceptRules {
  const std::unordered_set<std::string>& consumers;
  const CanonicalLimits& payload_limits;
  /// InboxOptions::max_statement_bytes: the largest item is one that fits a statement alone.
  std::size_t max_statement_bytes;
};

/// @throws InboxValidationError naming the offending field; INBOX_ITEM_TOO_LARGE (field
///   "payload") when the item's batch record alone (batch_record_bytes) exceeds
///   rules.max_statement_bytes, so it could never be stored.
PreparedRequest prepare_request(const AcceptRequest& request, const AcceptRules& rules);

/// Appends `p` as accept_many's JSON record ({"i","sk","si","src","c","m","et","sv","p",
/// "md","fp"}, inbox_queries.hpp) with input position `index`.
void append_batch_record(std::string& out, std::size_t index, const PreparedRequest& p);
/// The length append_batch_record() appends for `p` at the largest possible index, plus
/// the array brackets: an item over the statement budget by this measure never fits.
std::size_t batch_record_bytes(const PreparedRequest& p);

/// Checks one identity-like text field: required, at most kMaxIdentityBytes, valid UTF-8
/// without U+0000. @throws InboxValidationError naming `field`.
void check_text_field(const std::string& value, const char* field, bool required);

}  // namespace boxcar::detail
