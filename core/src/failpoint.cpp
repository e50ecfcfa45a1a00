// The runtime side of BOXCAR_FAILPOINT (core/include/boxcar/core/detail/failpoint.hpp).
// Compiled only into -DBOXCAR_FAILPOINTS=ON builds (core/CMakeLists.txt).
#include "boxcar/core/detail/failpoint.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace boxcar::detail {
namespace {

struct Failpoint {
  std::string name;
  std::string action;
  double probability = 1.0;
};

std::vector<Failpoint> parse(const char* spec) {
  std::vector<Failpoint> out;
  if (!spec) return out;
  std::stringstream entries(spec);
  std::string entry;
  while (std::getline(entries, entry, ',')) {
    std::stringstream parts(entry);
    Failpoint f;
    std::string probability;
    std::getline(parts, f.name, ':');
    std::getline(parts, f.action, ':');
    if (std::getline(parts, probability, ':') && !probability.empty()) f.probability = std::stod(probability);
    if (!f.name.empty() && !f.action.empty()) out.push_back(std::move(f));
  }
  return out;
}

const std::vector<Failpoint>& configured() {
  static const std::vector<Failpoint> points = parse(std::getenv("BOXCAR_FAILPOINT"));
  return points;
}

bool draw(double probability) {
  if (probability >= 1.0) return true;
  static std::mutex mutex;
  static std::mt19937_64 random{std::random_device{}() ^ static_cast<std::uint64_t>(getpid())};
  std::lock_guard lock(mutex);
  return std::uniform_real_distribution<double>(0.0, 1.0)(random) < probability;
}

}  // namespace

void failpoint_hit(const char* name) {
  for (const auto& f : configured()) {
    if (f.name != name || !draw(f.probability)) continue;
    // stderr is unbuffered: the campaign's logs show which failpoint fired.
    std::fprintf(stderr, "failpoint %s: %s\n", name, f.action.c_str());
    if (f.action == "kill") ::kill(getpid(), SIGKILL);
    if (f.action == "abort") std::abort();
    if (f.action == "stop") ::kill(getpid(), SIGSTOP);
    if (f.action.rfind("sleep", 0) == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(std::stol(f.action.substr(5))));
  }
}

}  // namespace boxcar::detail
