// What every operator command shares: the table a command works on (RecordKind), the
// error for requests it refuses (OperatorError), and the timestamp type of its reports.
#pragma once

#include <chrono>
#include <string_view>

#include "boxcar/core/error.hpp"

namespace boxcar {

/// An operator request that cannot be carried out as asked. Nothing was written.
/// Codes:
///   DEAD_FILTER_REQUIRED   retry/discard without any criterion and without `all = true`
///   DEAD_FILTER_INVALID    limit 0, a negative age, or a consumer filter on outbox events
///   DEAD_ACTOR_REQUIRED    retry/discard without an actor (who did it is recorded)
///   DEAD_RECORD_NOT_FOUND  dead_show() for an id that does not exist or is not DEAD
///   PURGE_INVALID          a negative retention or a zero batch size
///   RECORD_KIND_INVALID    parse_record_kind() of anything but "inbox" / "outbox"
///   UNBLOCK_KEY_REQUIRED   unblock_key() without a key
///   UNBLOCK_SCOPE_REQUIRED unblock_key() without a scope, of a key blocked in several scopes
class OperatorError final : public Error {
 public:
  using Error::Error;
};

/// Which table a dead-record command works on: inbox_receipts or outbox_events.
enum class RecordKind { Inbox, Outbox };

/// "inbox" or "outbox".
const char* to_string(RecordKind kind) noexcept;
/// Inverse of to_string. @throws OperatorError RECORD_KIND_INVALID.
RecordKind parse_record_kind(std::string_view text);

using Timestamp = std::chrono::system_clock::time_point;

}  // namespace boxcar
