// exit_code_of(): which errors mean "usage", "not ready" or plain "failure".
#include "cli_exit_codes.hpp"

#include "boxcar/core/error.hpp"

namespace boxcar::detail {

ExitCode exit_code_of(const std::exception& error) noexcept {
  if (dynamic_cast<const ConfigError*>(&error) != nullptr) return ExitCode::Usage;
  if (const auto* database = dynamic_cast<const DatabaseError*>(&error)) {
    // Unreachable, refusing connections or out of pooled connections: the command may
    // succeed later unchanged. An uncertain commit or a failed statement is a failure.
    const auto& code = database->code();
    if (code == "DATABASE_UNAVAILABLE" || code == "DATABASE_POOL_TIMEOUT") return ExitCode::NotReady;
  }
  return ExitCode::Failure;
}

}  // namespace boxcar::detail
