// Signal handling via sigwait on a blocked mask: no async-signal-safety puzzles.
#include "boxcar/core/shutdown_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <ctime>
#include <thread>

namespace boxcar {
namespace {
sigset_t shutdown_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

// After the first signal, a second one ends the process at once.
void exit_on_second_signal(const sigset_t& set) {
  std::thread([set] {
    int second = 0;
    while (sigwait(&set, &second) != 0) {
    }
    _exit(128 + second);
  }).detach();
}
}  // namespace

ShutdownSignals::ShutdownSignals() {
  const sigset_t set = shutdown_set();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int ShutdownSignals::wait_for_shutdown() {
  const sigset_t set = shutdown_set();
  int signal = 0;
  while (sigwait(&set, &signal) != 0) {
  }
  exit_on_second_signal(set);
  return signal;
}

std::optional<int> ShutdownSignals::wait_for_shutdown(std::chrono::milliseconds limit) {
  const sigset_t set = shutdown_set();
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    const auto left = std::max(std::chrono::nanoseconds(0), deadline - std::chrono::steady_clock::now());
    const timespec timeout{.tv_sec = static_cast<time_t>(left.count() / 1000000000),
                           .tv_nsec = static_cast<long>(left.count() % 1000000000)};
    const int signal = sigtimedwait(&set, nullptr, &timeout);
    if (signal > 0) {
      exit_on_second_signal(set);
      return signal;
    }
    if (errno == EAGAIN) return std::nullopt;  // EINTR (another signal's handler): wait on
  }
}

}  // namespace boxcar
