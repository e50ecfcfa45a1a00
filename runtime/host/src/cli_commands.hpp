// The operator sub-commands of run_cli (status, dead, purge) on top of operator.hpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "boxcar/host/config.hpp"

namespace boxcar::detail {

/// Runs `status`, `dead ...` or `purge` with their own arguments; returns the exit code.
/// @throws ConfigError for bad arguments (exit code 2 in run_cli).
int run_operator_command(const RuntimeConfig& config, const std::string& command,
                         const std::vector<std::string>& args, std::ostream& out);

}  // namespace boxcar::detail
