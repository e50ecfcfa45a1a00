// Validation of an AcceptRequest into the exact values that are stored and compared.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>

#include "boxcar/inbox/accept_request.hpp"
#include "boxcar/inbox/ordering.hpp"
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
  /// Set when the consumer orders by key (InboxOptions::ordering); park_after is the
  /// recorded head-of-line policy, nullopt for block.
  std::optional<std::string> ordering_key;
  std::optional<int> park_after;
  /// batch_item_bytes() of this item, measured once by prepare_request().
  std::size_t batch_bytes = 0;

  /// The identity as one string, for grouping repeats inside a batch.
  std::string identity_key() const;
};

/// PreparedRequest::identity_key() of the identity given by its parts (a stored row's).
std::string identity_key(std::string_view consumer, std::string_view source, std::string_view scope_kind,
                         std::string_view scope_id, std::string_view message_id);

struct AcceptRules {
  const std::unordered_set<std::string>& consumers;
  const CanonicalLimits& payload_limits;
  /// InboxOptions::ordering: consumers that order their receipts by key.
  const std::map<std::string, OrderingRule>& ordering;
  /// InboxOptions::max_statement_bytes: the largest item is one that fits a statement alone.
  std::size_t max_statement_bytes;
};

/// @throws InboxValidationError naming the offending field; INBOX_ITEM_TOO_LARGE (field
///   "payload") when the item alone (batch_item_bytes) exceeds
///   rules.max_statement_bytes, so it could never be stored.
PreparedRequest prepare_request(const AcceptRequest& request, const AcceptRules& rules);

/// The bytes `p` adds to accept_many's column arrays (inbox_queries.hpp kInsertMany: one
/// array literal per column, payload and metadata as one JSON array each): every field as
/// an element with its separator (quoted and escaped in an array literal, as it is in a
/// JSON array), plus the arrays' brackets. An item over the statement budget by this
/// measure never fits.
std::size_t batch_item_bytes(const PreparedRequest& p);

/// Checks one identity-like text field: required, at most kMaxIdentityBytes, valid UTF-8
/// without U+0000. @throws InboxValidationError naming `field`.
void check_text_field(const std::string& value, const char* field, bool required);

}  // namespace boxcar::detail
