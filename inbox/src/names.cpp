// String forms of the inbox's enums, as stored in the database.
#include <stdexcept>
#include <string>

#include "boxcar/inbox/receipt.hpp"

namespace boxcar {

const char* to_string(ReceiptStatus status) noexcept {
  switch (status) {
    case ReceiptStatus::Pending:
      return "PENDING";
    case ReceiptStatus::Processing:
      return "PROCESSING";
    case ReceiptStatus::Retryable:
      return "RETRYABLE";
    case ReceiptStatus::Completed:
      return "COMPLETED";
    case ReceiptStatus::Dead:
      return "DEAD";
    case ReceiptStatus::Waiting:
      return "WAITING";
  }
  return "UNKNOWN";
}

ReceiptStatus parse_receipt_status(std::string_view text) {
  for (auto status : {ReceiptStatus::Pending, ReceiptStatus::Processing, ReceiptStatus::Retryable,
                      ReceiptStatus::Completed, ReceiptStatus::Dead, ReceiptStatus::Waiting}) {
    if (text == to_string(status)) return status;
  }
  throw std::invalid_argument("unknown receipt status '" + std::string(text) + "'");
}

const char* to_string(Receipt::Kind kind) noexcept {
  return kind == Receipt::Kind::Accepted ? "accepted" : "duplicate";
}

}  // namespace boxcar
