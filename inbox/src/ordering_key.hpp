// A message's ordering key under its consumer's rule (boxcar/inbox/ordering.hpp).
#pragma once

#include <string>

#include "boxcar/inbox/accept_request.hpp"
#include "boxcar/inbox/ordering.hpp"

namespace boxcar::detail {

/// The key, checked like an identity field (required, at most 512 bytes, UTF-8).
/// @throws InboxValidationError naming the rule's field: INBOX_ORDERING_KEY_MISSING when
///   the message has no such value, INBOX_ORDERING_KEY_INVALID when it is neither a
///   string nor an integer, or the codes of check_text_field.
std::string ordering_key_of(const OrderingRule& rule, const AcceptRequest& request);

}  // namespace boxcar::detail
