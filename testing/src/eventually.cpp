// eventually(): the polling loop every test waits with.
#include "boxcar/testing/eventually.hpp"

namespace boxcar::testing {

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(kEventuallyPoll);
  }
  return condition();
}

}  // namespace boxcar::testing
