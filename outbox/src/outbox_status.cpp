// String forms of OutboxStatus, as stored in the database.
#include "boxcar/outbox/outbox_status.hpp"

#include <stdexcept>
#include <string>

namespace boxcar {

const char* to_string(OutboxStatus status) noexcept {
  switch (status) {
    case OutboxStatus::Pending:
      return "PENDING";
    case OutboxStatus::Waiting:
      return "WAITING";
    case OutboxStatus::Publishing:
      return "PUBLISHING";
    case OutboxStatus::Retryable:
      return "RETRYABLE";
    case OutboxStatus::Published:
      return "PUBLISHED";
    case OutboxStatus::Dead:
      return "DEAD";
  }
  return "UNKNOWN";
}

OutboxStatus parse_outbox_status(std::string_view text) {
  for (auto status : {OutboxStatus::Pending, OutboxStatus::Waiting, OutboxStatus::Publishing, OutboxStatus::Retryable,
                      OutboxStatus::Published, OutboxStatus::Dead}) {
    if (text == to_string(status)) return status;
  }
  throw std::invalid_argument("unknown outbox status '" + std::string(text) + "'");
}

}  // namespace boxcar
