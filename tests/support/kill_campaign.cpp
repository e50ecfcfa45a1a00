#include "kill_campaign.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <random>
#include <thread>

#include <catch2/catch.hpp>

namespace boxcar::testing {

int run_kill_campaign(const KillCampaign& campaign) {
  std::mt19937 rng{std::random_device{}()};
  std::uniform_int_distribution<int> step(campaign.step_min, campaign.step_max);
  int mid_drain = 0;
  for (int kill = 0; kill < campaign.max_kills && mid_drain < campaign.mid_drain_kills; ++kill) {
    if (campaign.finished() >= campaign.queued()) campaign.queue_more();
    // At most everything queued: a process that drained the queue is not waited on.
    const std::int64_t target = std::min(campaign.queued(), campaign.finished() + step(rng));
    const pid_t pid = campaign.spawn();
    const auto give_up = std::chrono::steady_clock::now() + campaign.give_up;
    while (campaign.finished() < target && std::chrono::steady_clock::now() < give_up)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ::kill(pid, SIGKILL);
    const std::int64_t at_kill = campaign.finished();
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    if (at_kill < campaign.queued()) ++mid_drain;
  }
  return mid_drain;
}

}  // namespace boxcar::testing
