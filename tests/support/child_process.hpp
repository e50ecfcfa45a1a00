// A program run as a child process the way an operator or a supervisor runs it: its own
// environment (nothing inherited from the test), output captured, and never waited for
// without a bound, so a command that wrongly keeps running fails the test instead of
// hanging it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace boxcar::testing {

class ChildProcess {
 public:
  /// Starts `program args...` with exactly `environment` (NAME=VALUE) plus PATH, its
  /// stdout and stderr both going to a temporary file.
  ChildProcess(const std::string& program, const std::vector<std::string>& args,
               const std::vector<std::string>& environment);
  /// SIGKILLs the child if it still runs, and reaps it.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void signal(int signal);
  /// The exit status (128 + signal when a signal ended it), or nullopt when the child
  /// still runs after `limit`.
  std::optional<int> wait(std::chrono::milliseconds limit);
  /// Everything written to stdout and stderr so far.
  std::string output() const;

 private:
  pid_t pid_ = -1;
  std::optional<int> status_{};
  std::string output_path_;
};

struct ProcessResult {
  /// The exit status, or -1 when the process was still running after the limit (it is
  /// then killed).
  int exit_code = -1;
  std::string output;
};

/// Runs the program to completion (at most `limit`).
ProcessResult run_process(const std::string& program, const std::vector<std::string>& args,
                          const std::vector<std::string>& environment,
                          std::chrono::milliseconds limit = std::chrono::seconds(60));

/// Splits "status --json --schema s" at spaces (documented command lines have no quoting).
std::vector<std::string> split_words(const std::string& line);

/// A TCP port on 127.0.0.1 that was free a moment ago.
int free_loopback_port();

}  // namespace boxcar::testing
