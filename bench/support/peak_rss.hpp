// Peak resident memory of a component measured in a process of its own (bench/rss_probe),
// so nothing of the benchmark's own state (loaded rows, mock brokers, baselines) counts.
//
// The probe reports its own VmHWM: the child's ru_maxrss from wait4() is not usable,
// because posix_spawn's vfork-style child (and a fork()ed one) inherits the parent's
// high-water mark at exec.
#pragma once

#include <string>
#include <vector>

namespace boxcar::bench {

/// This process's peak resident set (VmHWM of /proc/self/status), in KiB; 0 if unknown.
long self_peak_rss_kib();

/// The line a probe prints last: `probe_peak_rss_kib N`.
void print_peak_rss_line();

/// Runs `argv` (argv[0] the program path) as a child process, waits for it and returns
/// the peak RSS it reported, in MiB. Its other output goes to this process's stderr.
/// @throws std::runtime_error when it cannot start, fails, or reports nothing.
double run_probe_peak_mib(const std::vector<std::string>& argv);

/// `rss NAME VALUE LIMIT`: VALUE (MiB, one decimal) at or under LIMIT meets the target.
void print_rss_line(const std::string& name, double value_mib, int limit_mib);

}  // namespace boxcar::bench
