// The console's actions (docs/console.md, "Actions"): retry or discard a DEAD group or one
// DEAD record, release a blocked ordering key. A preview counts the rows an action would
// change; a run repeats the count and proceeds only when it still equals the number the
// operator confirmed, then records the action with its actor. Everything here runs
// through the operator role's pool (ConsoleSources::writes).
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "boxcar/core/error.hpp"

#include "boxcar/runtime/console_server.hpp"

namespace boxcar::detail {

/// Most rows one action changes. A larger group is acted on in several confirmed steps.
inline constexpr std::size_t kMaxActionRows = 10000;

/// A request the console refuses: `status` is the HTTP status, `code()` the stable code.
class ConsoleRequestError final : public Error {
 public:
  ConsoleRequestError(int status, std::string code, const std::string& message)
      : Error(std::move(code), message), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

/// {"action", "kind", "target", "rows", "limit_reached"} for the action `body` describes:
/// {"action": "retry"|"discard"|"unblock", "kind": "inbox"|"outbox", and one of "group",
/// "id", or "key" (with "consumer" and "scope" optional)}.
/// @throws ConsoleRequestError 400 ACTION_INVALID naming the field; OperatorError;
///   DatabaseError.
nlohmann::json preview_console_action(const ConsoleSources& sources, const nlohmann::json& body);

/// Runs the action when a fresh count equals body["confirm_rows"], and records it with
/// "console:" + body["actor"]: {"action", "kind", "target", "rows", "ids"}.
/// @throws ConsoleRequestError 400 ACTION_INVALID (a field, the actor, confirm_rows), 409
///   CONFIRMATION_MISMATCH (the count changed: its message names the new one);
///   OperatorError; DatabaseError.
nlohmann::json run_console_action(const ConsoleSources& sources, const nlohmann::json& body);

}  // namespace boxcar::detail
