#include "rabbitmq_node.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include <openssl/evp.h>
#include <openssl/sha.h>

namespace boxcar::examples::testing {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr const char* kServerScript = "/usr/lib/rabbitmq/bin/rabbitmq-server";
constexpr const char* kServiceUser = "rabbitmq";

/// A loopback port nobody listens on right now (the node binds it a moment later; a
/// race with another process is handled by retrying the start).
int free_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot bind a loopback port");
  }
  const int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

void write_file(const fs::path& path, const std::string& text, mode_t mode, uid_t uid, gid_t gid) {
  std::ofstream(path) << text;
  ::chmod(path.c_str(), mode);
  if (::geteuid() == 0 && ::chown(path.c_str(), uid, gid) != 0) {
    throw std::runtime_error("cannot chown " + path.string());
  }
}

std::string random_hex(std::size_t n) {
  std::random_device rd;
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += "0123456789abcdef"[rd() % 16];
  return out;
}

std::string tail(const fs::path& path, std::size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string line; std::getline(in, line);) all.push_back(line);
  std::string out;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) out += all[i] + "\n";
  return out;
}

/// RabbitMQ's rabbit_password_hashing_sha256: base64(salt ++ sha256(salt ++ password)).
std::string password_hash(const std::string& password) {
  std::random_device rd;
  std::string salted(4, '\0');
  for (char& c : salted) c = static_cast<char>(rd() & 0xff);
  salted += password;
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(salted.data()), salted.size(), digest);
  const std::string hashed = salted.substr(0, 4) + std::string(reinterpret_cast<char*>(digest), sizeof digest);
  std::string out(4 * ((hashed.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(hashed.data()), static_cast<int>(hashed.size()));
  out.resize(static_cast<std::size_t>(n));
  return out;
}

/// Definitions loaded at boot: vhost "/", guest as administrator, and `users`. With
/// definitions to import the node seeds no default user, so guest is listed too.
std::string definitions(const std::vector<BrokerUser>& users) {
  nlohmann::json users_json = nlohmann::json::array();
  nlohmann::json permissions = nlohmann::json::array();
  const auto add = [&](const std::string& name, const std::string& password, const std::string& tags,
                       const std::string& configure, const std::string& write, const std::string& read) {
    users_json.push_back({{"name", name},
                          {"password_hash", password_hash(password)},
                          {"hashing_algorithm", "rabbit_password_hashing_sha256"},
                          {"tags", tags}});
    permissions.push_back({{"user", name}, {"vhost", "/"}, {"configure", configure}, {"write", write}, {"read", read}});
  };
  add("guest", "guest", "administrator", ".*", ".*", ".*");
  for (const BrokerUser& u : users) add(u.name, u.password, "", u.configure, u.write, u.read);
  return nlohmann::json{{"users", users_json}, {"vhosts", {{{"name", "/"}}}}, {"permissions", permissions}}.dump();
}

/// Asks the epmd on `port` to exit (its "kill" request: length 1, byte 'k'). epmd
/// daemonizes itself out of the node's process group, so it outlives the node otherwise.
void kill_epmd(int port) noexcept {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    const char request[] = {0, 1, 'k'};
    if (::write(fd, request, sizeof request) == static_cast<ssize_t>(sizeof request)) {
      char reply[8];
      [[maybe_unused]] const ssize_t n = ::read(fd, reply, sizeof reply);
    }
  }
  ::close(fd);
}

/// waitpid() with a deadline; true when `pid` was reaped.
bool wait_for_exit(pid_t pid, std::chrono::milliseconds timeout) {
  const auto until = Clock::now() + timeout;
  while (true) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid || (r < 0 && errno == ECHILD)) return true;
    if (Clock::now() >= until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

std::optional<std::string> RabbitMqNode::unavailable_reason() {
  if (::access(kServerScript, X_OK) != 0) {
    return std::string(kServerScript) + " is missing: install the rabbitmq-server package (scripts/setup does)";
  }
  if (::geteuid() == 0 && !::getpwnam(kServiceUser)) {
    return std::string("running as root but the '") + kServiceUser +
           "' user that the rabbitmq-server package creates does not exist";
  }
  return std::nullopt;
}

RabbitMqNode::RabbitMqNode(std::vector<BrokerUser> users) : users_(std::move(users)) {
  if (auto reason = unavailable_reason()) throw std::runtime_error(*reason);
  uid_ = ::geteuid();
  gid_ = ::getegid();
  if (uid_ == 0) {
    // The Erlang VM would run as root otherwise; the package's service account is the
    // unprivileged owner, as the postgres account is for the test PostgreSQL.
    const passwd* pw = ::getpwnam(kServiceUser);
    uid_ = pw->pw_uid;
    gid_ = pw->pw_gid;
  }
  std::string failure;
  for (int attempt = 1; attempt <= 3; ++attempt) {
    try {
      if (try_start(failure)) return;
    } catch (...) {
      stop();  // the destructor does not run for a throwing constructor
      throw;
    }
    stop();
  }
  throw std::runtime_error("rabbitmq: the node did not start:\n" + failure);
}

RabbitMqNode::~RabbitMqNode() { stop(); }

AmqpOptions RabbitMqNode::amqp() const {
  return AmqpOptions{.host = "127.0.0.1", .port = amqp_port_, .user = "guest", .password = "guest", .vhost = "/"};
}

AmqpOptions RabbitMqNode::amqp_as(const BrokerUser& user) const {
  AmqpOptions options = amqp();
  options.user = user.name;
  options.password = user.password;
  return options;
}

std::string RabbitMqNode::log_tail() const {
  if (dir_.empty()) return {};
  return tail(fs::path(dir_) / "stdout.log", 20) + tail(fs::path(dir_) / "log" / "node.log", 30);
}

bool RabbitMqNode::try_start(std::string& failure) {
  char pattern[] = "/tmp/boxcar-rabbitmq.XXXXXX";
  if (!::mkdtemp(pattern)) throw std::runtime_error("mkdtemp failed");
  dir_ = pattern;
  const fs::path dir(dir_);
  fs::create_directories(dir / "mnesia");
  fs::create_directories(dir / "log");
  ::chmod(dir_.c_str(), 0700);
  if (::geteuid() == 0) {
    for (const fs::path& p : {dir, dir / "mnesia", dir / "log"}) {
      if (::chown(p.c_str(), uid_, gid_) != 0) throw std::runtime_error("cannot chown " + p.string());
    }
  }
  // No plugins: the management plugin alone would double the boot time.
  write_file(dir / "enabled_plugins", "[].\n", 0644, uid_, gid_);
  // The users exist from the first boot: a definitions file, as a deployment would ship.
  write_file(dir / "definitions.json", definitions(users_), 0600, uid_, gid_);
  // A small disk alarm threshold: a nearly full /tmp must not block publishers.
  write_file(dir / "rabbitmq.conf",
             "disk_free_limit.absolute = 1MB\nload_definitions = " + (dir / "definitions.json").string() + "\n", 0644,
             uid_, gid_);
  // The node's own cookie in its own HOME, never the system node's.
  write_file(dir / ".erlang.cookie", random_hex(20), 0400, uid_, gid_);

  amqp_port_ = free_loopback_port();
  dist_port_ = free_loopback_port();
  epmd_port_ = free_loopback_port();
  nodename_ = "boxcar-test-" + std::to_string(::getpid()) + "-" + random_hex(4) + "@localhost";

  // Everything the child needs is built before fork(): between fork and exec only
  // async-signal-safe calls are allowed.
  std::vector<std::string> env = {
      "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
      "HOME=" + dir_,
      "LANG=C.UTF-8",
      "LC_ALL=C.UTF-8",
      "RABBITMQ_NODENAME=" + nodename_,
      "RABBITMQ_NODE_IP_ADDRESS=127.0.0.1",
      "RABBITMQ_NODE_PORT=" + std::to_string(amqp_port_),
      "RABBITMQ_DIST_PORT=" + std::to_string(dist_port_),
      "ERL_EPMD_PORT=" + std::to_string(epmd_port_),
      "ERL_EPMD_ADDRESS=127.0.0.1",
      "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS=-kernel inet_dist_use_interface {127,0,0,1}",
      "RABBITMQ_MNESIA_BASE=" + (dir / "mnesia").string(),
      "RABBITMQ_LOG_BASE=" + (dir / "log").string(),
      "RABBITMQ_LOGS=" + (dir / "log" / "node.log").string(),
      "RABBITMQ_CONFIG_FILE=" + (dir / "rabbitmq.conf").string(),
      "RABBITMQ_ADVANCED_CONFIG_FILE=" + (dir / "advanced.config").string(),
      "RABBITMQ_ENABLED_PLUGINS_FILE=" + (dir / "enabled_plugins").string(),
      "RABBITMQ_PID_FILE=" + (dir / "node.pid").string(),
      // Ignore /etc/rabbitmq/rabbitmq-env.conf: the system node's settings are not ours.
      "RABBITMQ_CONF_ENV_FILE=/dev/null",
  };
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out_path = (dir / "stdout.log").string();
  const pid_t parent = ::getpid();
  const bool drop_privileges = ::geteuid() == 0;
  const uid_t uid = uid_;
  const gid_t gid = gid_;

  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::setsid();  // its own process group, so stop() can signal the whole node
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out >= 0) {
      ::dup2(out, STDOUT_FILENO);
      ::dup2(out, STDERR_FILENO);
    }
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    if (::chdir(dir_.c_str()) != 0) ::_exit(126);
    if (drop_privileges) {
      if (::setgroups(1, &gid) != 0 || ::setgid(gid) != 0 || ::setuid(uid) != 0) ::_exit(126);
    }
    // If the test process dies without running its destructors, the node follows it
    // (set after setuid, which would clear it). The exec chain keeps this pid.
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(126);
    char* argv[] = {const_cast<char*>(kServerScript), nullptr};
    ::execve(kServerScript, argv, envp.data());
    ::_exit(127);
  }

  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (Clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      failure = "node exited during startup (status " + std::to_string(status) + "):\n" + log_tail();
      return false;
    }
    try {
      AmqpSession probe(amqp(), std::chrono::milliseconds(1000));
      return true;
    } catch (const AmqpError&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
  failure = "no AMQP login within 60 s:\n" + log_tail();
  return false;
}

void RabbitMqNode::stop() noexcept {
  if (pid_ > 0) {
    // SIGTERM makes the node shut down cleanly (about a second); SIGKILL the whole
    // process group if it does not.
    ::kill(pid_, SIGTERM);
    if (!wait_for_exit(pid_, std::chrono::seconds(20))) {
      ::kill(-pid_, SIGKILL);
      wait_for_exit(pid_, std::chrono::seconds(5));
    }
    pid_ = -1;
  }
  if (epmd_port_ > 0) {
    kill_epmd(epmd_port_);
    epmd_port_ = 0;
  }
  if (!dir_.empty()) {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
    dir_.clear();
  }
}

}  // namespace boxcar::examples::testing
