// `boxcar status [--json] [--watch [SECONDS] [--count N]] [--check]` (docs/operator.md).
#pragma once

#include <iosfwd>

#include "boxcar/core/shutdown_signals.hpp"
#include "cli_command_tree.hpp"

namespace boxcar::detail {

/// Adds `status` to `tree`; it writes to `out`. `out_is_terminal` picks how --watch
/// redraws (clear and redraw on a terminal, successive snapshots otherwise); --watch
/// stops when `signals` reports SIGINT/SIGTERM.
void add_status_command(CommandTree& tree, std::ostream& out, bool out_is_terminal, ShutdownSignals& signals);

}  // namespace boxcar::detail
