// Test support: the processes the BullMQ integration test runs (example_webhook, the Node
// worker, the Node producer and job tool), with extra environment variables and a working
// directory. A ChildProcess runs in the background and is stopped (SIGTERM, then SIGKILL)
// when it goes out of scope, also when a test fails; run() waits and captures stdout.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace bullmq_example::testing {

/// Variables added to (or replacing those of) the test's own environment.
using Environment = std::map<std::string, std::string>;

/// The executable `name` on PATH, or empty.
std::string find_on_path(const std::string& name);

class ChildProcess {
 public:
  /// Starts argv[0] (a path) in `directory`; stdout and stderr go to `log_path`.
  /// @throws std::runtime_error when fork fails.
  ChildProcess(const std::vector<std::string>& argv, const Environment& environment, const std::string& directory,
               const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool running();
  /// SIGTERM, then SIGKILL after `grace_seconds`; returns the exit status (128 + signal
  /// when killed). Once stopped, returns the same status again.
  int stop(int grace_seconds = 10);

 private:
  pid_t pid_ = -1;
  int status_ = -1;
};

struct RunResult {
  int status = -1;  // exit status, 128 + signal when killed
  std::string out;  // stdout; stderr is passed through to the test's
};

/// Runs argv[0] (a path) in `directory` to completion.
RunResult run(const std::vector<std::string>& argv, const Environment& environment, const std::string& directory);

}  // namespace bullmq_example::testing
