// SIGTERM/SIGINT handling for Boxcar processes: the first signal asks for a graceful
// drain, a second one exits at once.
//
// Construct it in main() before starting any thread, so every thread inherits the
// blocked signal mask and only wait_for_shutdown() receives them.
#pragma once

#include <chrono>
#include <optional>

namespace boxcar {

class ShutdownSignals {
 public:
  /// Blocks SIGTERM and SIGINT in the calling thread (and the threads it starts later).
  ShutdownSignals();
  ShutdownSignals(const ShutdownSignals&) = delete;
  ShutdownSignals& operator=(const ShutdownSignals&) = delete;

  /// Blocks until SIGTERM or SIGINT arrives and returns its number. From then on a second
  /// signal ends the process immediately with exit status 128 + signal.
  int wait_for_shutdown();

  /// The same, giving up after `limit`: nullopt when no signal arrived by then (a loop
  /// that works between waits, such as `boxcar status --watch`, polls with it).
  std::optional<int> wait_for_shutdown(std::chrono::milliseconds limit);
};

}  // namespace boxcar
