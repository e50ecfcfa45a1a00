// The exit codes of every command of run_cli, decided in this one place so that scripts
// and probes can branch on them (docs/operator.md, "Exit codes"):
//
//   0  Ok        the command did what it was asked (a role: it drained and stopped cleanly)
//   1  Failure   it ran and failed: an operator refusal (DEAD_FILTER_REQUIRED), a database
//                error other than unavailability, nothing to release (dead unblock), a
//                handler thread abandoned at shutdown
//   2  Usage     the command line or the configuration is wrong: fix it, do not retry
//   3  NotReady  not ready or unhealthy: the database could not be reached (any command),
//                or `status --check` found the schema not ready; retrying later may help
#pragma once

#include <exception>

namespace boxcar::detail {

enum class ExitCode : int { Ok = 0, Failure = 1, Usage = 2, NotReady = 3 };

/// The process exit status of `code`.
constexpr int exit_status(ExitCode code) noexcept { return static_cast<int>(code); }

/// The exit code for an error that ended a command: ConfigError is Usage; a DatabaseError
/// saying the database is unavailable (DATABASE_UNAVAILABLE, DATABASE_POOL_TIMEOUT) is
/// NotReady; anything else is Failure.
ExitCode exit_code_of(const std::exception& error) noexcept;

}  // namespace boxcar::detail
