// ChildProcess and run(): fork + execve with a prepared environment (see child_process.hpp).
#include "child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace bullmq_example::testing {

namespace {

using namespace std::chrono_literals;

/// argv and envp as execve wants them, built before fork: after fork only
/// async-signal-safe calls are allowed (the test process has threads).
struct ExecImage {
  std::vector<std::string> args;
  std::vector<std::string> env;
  std::vector<char*> argv;
  std::vector<char*> envp;

  ExecImage(const std::vector<std::string>& arguments, const Environment& environment) : args(arguments) {
    for (char** e = environ; *e; ++e) {
      const std::string entry = *e;
      if (!environment.count(entry.substr(0, entry.find('=')))) env.push_back(entry);
    }
    for (const auto& [name, value] : environment) env.push_back(name + "=" + value);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
  }
};

int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

/// In the child: dies with the test, enters `directory`, wires stdout, execs. Never returns.
[[noreturn]] void exec_child(const ExecImage& image, const std::string& directory, int out_fd, bool with_stderr) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::chdir(directory.c_str()) != 0) ::_exit(126);
  const int null = ::open("/dev/null", O_RDONLY);
  if (null >= 0) ::dup2(null, STDIN_FILENO);
  if (out_fd >= 0) {
    ::dup2(out_fd, STDOUT_FILENO);
    if (with_stderr) ::dup2(out_fd, STDERR_FILENO);
  }
  ::execve(image.argv[0], image.argv.data(), image.envp.data());
  ::_exit(127);
}

}  // namespace

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

ChildProcess::ChildProcess(const std::vector<std::string>& argv, const Environment& environment,
                           const std::string& directory, const std::string& log_path) {
  const ExecImage image(argv, environment);
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) throw std::runtime_error("cannot open " + log_path);
  pid_ = ::fork();
  if (pid_ < 0) {
    ::close(log);
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) exec_child(image, directory, log, true);
  ::close(log);
}

ChildProcess::~ChildProcess() { stop(5); }

bool ChildProcess::running() {
  if (pid_ <= 0) return false;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) != pid_) return true;
  status_ = exit_status(status);
  pid_ = -1;
  return false;
}

int ChildProcess::stop(int grace_seconds) {
  if (!running()) return status_;
  ::kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
  while (running()) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      status_ = exit_status(status);
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(20ms);
  }
  return status_;
}

RunResult run(const std::vector<std::string>& argv, const Environment& environment, const std::string& directory) {
  const ExecImage image(argv, environment);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) exec_child(image, directory, pipe_fds[1], false);  // dup2 clears O_CLOEXEC
  ::close(pipe_fds[1]);
  RunResult result;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) result.out.append(buffer, std::size_t(n));
  ::close(pipe_fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.status = exit_status(status);
  return result;
}

}  // namespace bullmq_example::testing
