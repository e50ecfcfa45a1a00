// The outbox's stored status names and the Kafka header names it reserves.
#include <catch2/catch.hpp>

#include <set>
#include <stdexcept>
#include <string>

#include "boxcar/outbox/outbox_status.hpp"
#include "boxcar/outbox/reserved_headers.hpp"

using boxcar::OutboxStatus;

TEST_CASE("every outbox status parses back from the name stored in the status column") {
  // The CHECK constraint of migrations/0013_outbox_key_order.sql allows exactly these.
  const std::set<std::string> stored = {"PENDING", "WAITING", "PUBLISHING", "RETRYABLE", "PUBLISHED", "DEAD"};
  std::set<std::string> written;
  for (auto status : {OutboxStatus::Pending, OutboxStatus::Waiting, OutboxStatus::Publishing, OutboxStatus::Retryable,
                      OutboxStatus::Published, OutboxStatus::Dead}) {
    written.insert(to_string(status));
    CHECK(boxcar::parse_outbox_status(to_string(status)) == status);
  }
  CHECK(written == stored);
}

TEST_CASE("an unknown outbox status is rejected rather than guessed") {
  CHECK_THROWS_AS(boxcar::parse_outbox_status("published"), std::invalid_argument);
  CHECK_THROWS_AS(boxcar::parse_outbox_status(""), std::invalid_argument);
}

TEST_CASE("the reserved header names are distinct and recognised, and custom names are not") {
  namespace headers = boxcar::headers;
  const std::set<std::string_view> names(headers::kReserved.begin(), headers::kReserved.end());
  CHECK(names.size() == headers::kReserved.size());
  for (const auto name : headers::kReserved) CHECK(headers::is_reserved(name));
  CHECK(headers::is_reserved("event_id"));
  CHECK_FALSE(headers::is_reserved("x-origin"));
  CHECK_FALSE(headers::is_reserved("Event_Id"));
  CHECK_FALSE(headers::is_reserved(""));
}
