// The states of an outbox event, as stored in outbox_events.status
// (migrations/0002_outbox.sql): PENDING → PUBLISHING (claimed by a publisher) →
// PUBLISHED, or RETRYABLE (due again later) → ... → DEAD (out of attempts). An ordered event
// behind an unfinished event of its key is WAITING until that one is PUBLISHED or DEAD, then
// PENDING (0013_outbox_key_order.sql).
#pragma once

#include <string_view>

namespace boxcar {

enum class OutboxStatus { Pending, Waiting, Publishing, Retryable, Published, Dead };

/// "PENDING", "PUBLISHING", ... as stored in the status column.
const char* to_string(OutboxStatus status) noexcept;
/// Inverse of to_string; throws std::invalid_argument for anything else.
OutboxStatus parse_outbox_status(std::string_view text);

}  // namespace boxcar
