// The operator commands of run_cli (dead list|show|retry|discard|unblock, purge): their
// options and output, on top of operator.hpp. `status` has a file of its own
// (cli_status_command.hpp).
#pragma once

#include <iosfwd>

#include "cli_command_tree.hpp"

namespace boxcar::detail {

/// Adds `dead ...` and `purge` to `tree`; their results are written to `out`.
void add_operator_commands(CommandTree& tree, std::ostream& out);

}  // namespace boxcar::detail
