// SIGKILL, at random moments of real progress, a process that drains a queue: the fault
// campaign of the worker and publisher crash tests. A kill counts only when it lands before
// the queue is drained; a process that drains it first (a loaded machine lets it run far
// past its target before the campaign looks) gets more rows queued before the next kill.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>

namespace boxcar::testing {

struct KillCampaign {
  /// Starts one process that drains the queue.
  std::function<pid_t()> spawn;
  /// Rows the processes have finished so far (COMPLETED, PUBLISHED).
  std::function<std::int64_t()> finished;
  /// Rows queued so far.
  std::function<std::int64_t()> queued;
  /// Queues more rows.
  std::function<void()> queue_more;
  /// Each process is killed once it finished a random number of rows in [step_min, step_max]
  /// (at most what is queued), or after `give_up`.
  int step_min = 100;
  int step_max = 500;
  std::chrono::milliseconds give_up = std::chrono::seconds(30);
  /// Stops after this many kills mid-drain, or after max_kills kills in all.
  int mid_drain_kills = 5;
  int max_kills = 10;
};

/// Runs the campaign, checking that every process died of the SIGKILL. Returns the number
/// of kills that landed before the queue was drained.
int run_kill_campaign(const KillCampaign& campaign);

}  // namespace boxcar::testing
