// Signal handling via sigwait on a blocked mask: no async-signal-safety puzzles.
#include "boxcar/core/shutdown_signals.hpp"

#include <signal.h>
#include <unistd.h>

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
  std::thread([set] {
    int second = 0;
    while (sigwait(&set, &second) != 0) {
    }
    _exit(128 + second);
  }).detach();
  return signal;
}

}  // namespace boxcar
