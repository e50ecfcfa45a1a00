// SqsServer: `npm ci` once under a lock, then fork + (as root: drop to 'postgres') + exec
// node sqs_server.js --port 0 --port-file; wait for the port, then for ListQueues.
#include "sqs_server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "sqs_client.hpp"

#ifndef EXAMPLE_SQS_SERVER_DIR
#error "EXAMPLE_SQS_SERVER_DIR must name the build-tree copy of examples/sqs/server"
#endif

namespace boxcar::examples::sqs::testing {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path && *path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return {};
}

std::string node_executable() {
  std::string node = find_on_path("node");
  return node.empty() ? find_on_path("nodejs") : node;  // older Debian names it nodejs only
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string tail(const fs::path& path, std::size_t max_bytes = 3000) {
  const std::string text = read_file(path);
  return text.size() > max_bytes ? text.substr(text.size() - max_bytes) : text;
}

/// Runs argv in `dir` with stdout and stderr to `log`; returns the exit status
/// (128 + signal when killed, -1 after the timeout).
int run(const std::vector<std::string>& args, const fs::path& dir, const fs::path& log, std::chrono::seconds timeout) {
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
    }
    if (::chdir(dir.c_str()) != 0) ::_exit(126);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(50ms);
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// `npm ci` in the build-tree server directory unless node_modules matches the lock file.
/// ctest runs the test cases of this binary as parallel processes: the first one installs,
/// the others wait on the lock and then find it done.
void ensure_installed() {
  const fs::path dir = EXAMPLE_SQS_SERVER_DIR;
  const fs::path stamp = dir / "node_modules" / ".boxcar-installed-lock.json";
  const int lock = ::open((dir / ".install.lock").c_str(), O_RDWR | O_CREAT, 0644);
  if (lock < 0) throw std::runtime_error("cannot open " + (dir / ".install.lock").string());
  struct Unlock {
    int fd;
    ~Unlock() { ::close(fd); }  // closing releases the flock
  } unlock{lock};
  if (::flock(lock, LOCK_EX) != 0) throw std::runtime_error("flock failed");

  const std::string wanted = read_file(dir / "package-lock.json");
  if (wanted.empty()) throw std::runtime_error((dir / "package-lock.json").string() + " is missing: re-run cmake");
  if (fs::exists(stamp) && read_file(stamp) == wanted) return;

  const fs::path log = dir / "npm-ci.log";
  const int status = run({find_on_path("npm"), "ci", "--no-audit", "--no-fund", "--loglevel=error"}, dir, log,
                         std::chrono::seconds(300));
  if (status != 0) {
    throw std::runtime_error("npm ci in " + dir.string() + " failed (status " + std::to_string(status) + "):\n" +
                             tail(log));
  }
  std::ofstream(stamp, std::ios::binary) << wanted;
}

}  // namespace

std::optional<std::string> SqsServer::unavailable_reason() {
  if (node_executable().empty()) return "node is not installed (apt-get install nodejs; scripts/setup does)";
  if (find_on_path("npm").empty()) return "npm is not installed (apt-get install npm; scripts/setup does)";
  return std::nullopt;
}

SqsServer::SqsServer() {
  if (auto reason = unavailable_reason()) throw std::runtime_error(*reason);
  ensure_installed();

  char pattern[] = "/tmp/boxcar-sqs.XXXXXX";
  if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  if (uid == 0) {
    // A throw-away test server has no business running as root.
    const passwd* user = ::getpwnam("postgres");
    if (!user) user = ::getpwnam("nobody");
    if (!user) throw std::runtime_error("running as root and no 'postgres' or 'nobody' account");
    uid = user->pw_uid;
    gid = user->pw_gid;
    if (::chown(dir_.c_str(), uid, gid) != 0) throw std::runtime_error("chown of the sqs server directory failed");
  }

  const fs::path port_file = dir_ / "port";
  const fs::path log_file = dir_ / "server.log";
  std::vector<std::string> args = {node_executable(), (fs::path(EXAMPLE_SQS_SERVER_DIR) / "sqs_server.js").string(),
                                   "--host",          "127.0.0.1",
                                   "--port",          "0",
                                   "--port-file",     port_file.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid == 0) {
    if (::geteuid() == 0) {
      if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(126);
    }
    // After the credential change (which clears it): die with the test process.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(125);
    const int out = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    if (::chdir(dir_.c_str()) != 0) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;

  const auto deadline = std::chrono::steady_clock::now() + 30s;
  std::string failure = "no answer within 30 s";
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      failure = "the server exited during startup (status " + std::to_string(status) + ")";
      break;
    }
    if (port_ == 0 && fs::exists(port_file)) port_ = std::atoi(read_file(port_file).c_str());
    if (port_ > 0) {
      try {
        SqsClient probe({.endpoint = endpoint(), .timeout = 1000ms});
        probe.call("ListQueues", nlohmann::json::object());
        return;
      } catch (const SqsError& e) {
        failure = e.what();
      }
    }
    std::this_thread::sleep_for(50ms);
  }
  const std::string log = tail(log_file);
  stop();
  throw std::runtime_error("sqs server did not start: " + failure + "\n" + log);
}

void SqsServer::stop() noexcept {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(20ms);
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
    dir_.clear();
  }
}

SqsServer::~SqsServer() { stop(); }

}  // namespace boxcar::examples::sqs::testing
