// MessageOutcome, what a batch handler returns per message: no outcome can be left
// unstated (there is no default), and each factory carries what the receipt stores.
#include <catch2/catch.hpp>

#include <type_traits>

#include "boxcar/inbox/batch_handler.hpp"

using boxcar::BatchOutcomes;
using boxcar::MessageOutcome;

TEST_CASE("a message outcome has no default, so every outcome of a batch is stated") {
  STATIC_REQUIRE_FALSE(std::is_default_constructible_v<MessageOutcome>);
  const BatchOutcomes outcomes(3, MessageOutcome::completed());
  CHECK(outcomes.size() == 3);
}

TEST_CASE("retry and permanent outcomes carry their error text and type") {
  const auto completed = MessageOutcome::completed();
  CHECK(completed.kind() == MessageOutcome::Kind::Completed);
  CHECK(completed.error().empty());

  const auto retry = MessageOutcome::retry("the ledger is locked", "LedgerBusy");
  CHECK(retry.kind() == MessageOutcome::Kind::Retry);
  CHECK(retry.error() == "the ledger is locked");
  CHECK(retry.error_type() == "LedgerBusy");
  CHECK(MessageOutcome::retry("x").error_type() == "BatchRetry");

  const auto permanent = MessageOutcome::permanent("no such account");
  CHECK(permanent.kind() == MessageOutcome::Kind::Permanent);
  CHECK(permanent.error() == "no such account");
  CHECK(permanent.error_type() == "InboxPermanentError");
}
