// Worker processes for the fault tests: tests/support/worker_process.cpp, started with
// fork/exec and stopped with a signal.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include <catch2/catch.hpp>

namespace boxcar::testing {

/// Starts BOXCAR_TEST_WORKER_PATH on `url`/`schema` with `batch_size`; with
/// `batch_handler`, its consumer has an InboxBatchHandler; `max_attempts` 0 keeps the
/// process's own default.
inline pid_t spawn_worker(const std::string& url, const std::string& schema, int batch_size, bool batch_handler,
                          int max_attempts = 0) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (batch_handler) setenv("BOXCAR_TEST_BATCH_HANDLER", "1", 1);
    const std::string batch = std::to_string(batch_size);
    const std::string attempts = std::to_string(max_attempts);
    if (max_attempts > 0)
      execl(BOXCAR_TEST_WORKER_PATH, BOXCAR_TEST_WORKER_PATH, url.c_str(), schema.c_str(), batch.c_str(),
            attempts.c_str(), static_cast<char*>(nullptr));
    else
      execl(BOXCAR_TEST_WORKER_PATH, BOXCAR_TEST_WORKER_PATH, url.c_str(), schema.c_str(), batch.c_str(),
            static_cast<char*>(nullptr));
    _exit(127);
  }
  REQUIRE(pid > 0);
  return pid;
}

/// Waits for `pid` to end; its wait status.
inline int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

/// Sends `signal` to `pid` and waits for it to end; its wait status.
inline int stop_worker(pid_t pid, int signal) {
  ::kill(pid, signal);
  return wait_exit(pid);
}

}  // namespace boxcar::testing
