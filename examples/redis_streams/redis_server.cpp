// RedisServer: fork + (as root: drop to 'postgres') + exec redis-server; PING until ready.
#include "redis_server.hpp"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include "redis_client.hpp"

namespace redis_streams::testing {

using namespace std::chrono_literals;

namespace {

int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot find a free loopback port");
  }
  ::close(fd);
  return ntohs(address.sin_port);
}

}  // namespace

std::string RedisServer::find_executable() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::filesystem::path candidate = std::filesystem::path(dir.empty() ? "." : dir) / "redis-server";
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  for (const char* fallback : {"/usr/bin/redis-server", "/usr/sbin/redis-server"})
    if (::access(fallback, X_OK) == 0) return fallback;
  return {};
}

RedisServer::RedisServer(const std::string& executable) {
  char pattern[] = "/tmp/boxcar-redis.XXXXXX";
  if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  for (int attempt = 0; attempt < 5; ++attempt) {
    if (start(executable, free_loopback_port())) return;
  }
  stop();
  std::filesystem::remove_all(dir_);
  throw std::runtime_error("redis-server did not answer PING on a free loopback port");
}

bool RedisServer::start(const std::string& executable, int port) {
  uid_t uid = ::geteuid();
  gid_t gid = ::getegid();
  if (uid == 0) {
    // redis-server would happily run as root; a throw-away test server has no business to.
    const passwd* user = ::getpwnam("postgres");
    if (!user) user = ::getpwnam("nobody");
    if (!user) throw std::runtime_error("running as root and no 'postgres' or 'nobody' account");
    uid = user->pw_uid;
    gid = user->pw_gid;
    if (::chown(dir_.c_str(), uid, gid) != 0) throw std::runtime_error("chown of the redis directory failed");
  }
  const std::string port_text = std::to_string(port);
  const std::string log_file = (dir_ / "redis.log").string();
  std::vector<std::string> args = {executable,    "--port",    port_text,      "--bind",      "127.0.0.1",
                                   "--save",      "",          "--appendonly", "no",          "--dir",
                                   dir_.string(), "--logfile", log_file,       "--daemonize", "no"};
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
    const int null = ::open("/dev/null", O_RDWR);
    if (null >= 0) {
      ::dup2(null, STDIN_FILENO);
      ::dup2(null, STDOUT_FILENO);
      ::dup2(null, STDERR_FILENO);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  port_ = port;

  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: port taken, bad flag, ...
      pid_ = -1;
      return false;
    }
    try {
      RedisClient client({.host = "127.0.0.1", .port = port_, .timeout = 1000ms});
      if (client.call({"PING"}).str == "PONG") return true;
    } catch (const std::exception&) {
      // not listening yet
    }
    std::this_thread::sleep_for(50ms);
  }
  stop();
  return false;
}

void RedisServer::stop() noexcept {
  if (pid_ <= 0) return;
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

RedisServer::~RedisServer() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

}  // namespace redis_streams::testing
