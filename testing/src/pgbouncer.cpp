// Starts and stops a throw-away pgbouncer (see pgbouncer.hpp).
#include "boxcar/testing/pgbouncer.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <cstdint>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace boxcar::testing {
namespace {

bool connects(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Below the ephemeral range (32768+), where the kernel never picks a client's port.
int random_port() {
  static std::mt19937 random{std::random_device{}()};
  return std::uniform_int_distribution<int>(20000, 32000)(random);
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  if (!out) throw std::runtime_error("pgbouncer: cannot write " + path);
  ::chmod(path.c_str(), 0644);
}

}  // namespace

bool PgBouncer::available(const std::string& program) { return ::access(program.c_str(), X_OK) == 0; }

PgBouncer::PgBouncer(const std::string& database_url, PgBouncerOptions options) : options_(std::move(options)) {
  static const std::regex url(R"(^postgres(?:ql)?://([^:@/]+)(?::[^@/]*)?@([^:/]+):(\d+)/.*$)");
  std::smatch parts;
  if (!std::regex_match(database_url, parts, url))
    throw std::runtime_error("pgbouncer: expects postgresql://user@host:port/db, got another form");
  user_ = parts[1];
  target_host_ = parts[2];
  target_port_ = parts[3];
  char pattern[] = "/tmp/boxcar-pgbouncer.XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("pgbouncer: cannot create a directory");
  directory_ = pattern;
  ::chmod(directory_.c_str(), 0755);  // the account pgbouncer drops to reads the userlist
  write_file(directory_ + "/userlist.txt", "\"" + user_ + "\" \"\"\n");
  for (int attempt = 0; attempt < 10; ++attempt)
    if (start_on(random_port())) return;
  const std::string log = output();
  std::filesystem::remove_all(directory_);
  throw std::runtime_error("pgbouncer did not start: " + log);
}

bool PgBouncer::start_on(int port) {
  if (connects(port)) return false;  // taken
  std::ostringstream ini;
  ini << "[databases]\n"
      << "* = host=" << target_host_ << " port=" << target_port_ << "\n"
      << "[pgbouncer]\n"
      << "listen_addr = 127.0.0.1\n"
      << "listen_port = " << port << "\n"
      << "unix_socket_dir =\n"
      << "auth_type = trust\n"
      << "auth_file = " << directory_ << "/userlist.txt\n"
      << "pool_mode = " << options_.pool_mode << "\n"
      << "default_pool_size = " << options_.pool_size << "\n"
      << "max_client_conn = 500\n"
      << "server_reset_query = DISCARD ALL\n"
      << "ignore_startup_parameters = extra_float_digits\n";
  if (::geteuid() == 0) ini << "user = " << options_.run_as_user << "\n";
  const std::string ini_path = directory_ + "/pgbouncer.ini";
  write_file(ini_path, ini.str());
  const std::string log_path = directory_ + "/pgbouncer.log";

  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("pgbouncer: fork failed");
  if (pid_ == 0) {
    const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    ::execl(options_.program.c_str(), options_.program.c_str(), ini_path.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  port_ = port;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {  // exited: e.g. the port was taken meanwhile
      pid_ = -1;
      return false;
    }
    if (connects(port)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  stop();
  return false;
}

void PgBouncer::stop() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 250; ++i) {
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

PgBouncer::~PgBouncer() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

std::string PgBouncer::route(const std::string& url) const {
  static const std::regex host_port(R"(@([^:/]+):(\d+)/)");
  return std::regex_replace(url, host_port, "@127.0.0.1:" + std::to_string(port_) + "/");
}

std::string PgBouncer::output() const {
  std::ifstream in(directory_ + "/pgbouncer.log");
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace boxcar::testing
