// What accept() returns: the durable receipt of a message identity.
#pragma once

#include <cstdint>
#include <string_view>

namespace boxcar {

/// Waiting: behind the head of its ordering key (docs/ordering.md); it becomes Pending
/// when every receipt of its key accepted before it has finished.
enum class ReceiptStatus { Pending, Processing, Retryable, Completed, Dead, Waiting };

/// "PENDING", "PROCESSING", ..., "WAITING" as stored in the status column.
const char* to_string(ReceiptStatus status) noexcept;
/// Inverse of to_string; throws std::invalid_argument for anything else.
ReceiptStatus parse_receipt_status(std::string_view text);

struct Receipt {
  enum class Kind {
    /// A new durable receipt exists: acknowledge the delivery.
    Accepted,
    /// The identity was already retained with the same content: acknowledge without
    /// touching its state, attempts or retry schedule. Not a business success: the
    /// status may be DEAD and need an operator.
    Duplicate,
  };

  Kind kind;
  std::int64_t id;
  ReceiptStatus status;

  friend bool operator==(const Receipt&, const Receipt&) = default;
};

const char* to_string(Receipt::Kind kind) noexcept;

}  // namespace boxcar
