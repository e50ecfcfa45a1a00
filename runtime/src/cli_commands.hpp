// The operator commands of run_cli (status, dead list|show|retry|discard, purge): their
// options and output, on top of operator.hpp.
#pragma once

#include <iosfwd>

#include "cli_command_tree.hpp"

namespace boxcar::detail {

/// Adds `status`, `dead ...` and `purge` to `tree`; their results are written to `out`.
void add_operator_commands(CommandTree& tree, std::ostream& out);

}  // namespace boxcar::detail
