#include "prometheus_server.hpp"

#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "http_get.hpp"

namespace boxcar::testing {
namespace {

bool can_bind(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return free;
}

int ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 32768;
  in >> low;
  return low;
}

// Go's HTTP server sends a longer answer in chunks; the tests' client reads raw bytes.
std::string body_of(const HttpResponse& response) {
  std::string headers = response.headers;
  for (char& c : headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (headers.find("transfer-encoding: chunked") == std::string::npos) return response.body;
  std::string body;
  std::size_t at = 0;
  while (at < response.body.size()) {
    const auto line_end = response.body.find("\r\n", at);
    if (line_end == std::string::npos) break;
    const std::size_t size = std::stoul(response.body.substr(at, line_end - at), nullptr, 16);
    if (size == 0) break;
    body += response.body.substr(line_end + 2, size);
    at = line_end + 2 + size + 2;
  }
  return body;
}

}  // namespace

int free_port_below_ephemeral() {
  std::mt19937 random(std::random_device{}());
  // Below both the kernel's range and 32768 (the default range's start), whatever the
  // machine's setting.
  std::uniform_int_distribution<int> pick(10000, std::max(10001, std::min(ephemeral_low(), 32768)) - 1);
  for (int tries = 0; tries < 1000; ++tries)
    if (const int port = pick(random); can_bind(port)) return port;
  throw std::runtime_error("no free loopback port below the ephemeral range");
}

std::string url_encode(const std::string& text) {
  static const char* hex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

std::string PrometheusServer::binary() {
  for (const char* dir : {"/usr/bin", "/usr/local/bin", "/bin"})
    if (const auto path = std::filesystem::path(dir) / "prometheus"; ::access(path.c_str(), X_OK) == 0) return path;
  return "";
}

PrometheusServer::PrometheusServer(const std::vector<ScrapeTarget>& targets,
                                   const std::vector<std::filesystem::path>& rule_files) {
  char pattern[] = "/tmp/boxcar-prometheus-XXXXXX";
  if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
  directory_ = pattern;
  // 1 s intervals: rate() over a few seconds has samples, and rules are evaluated as
  // often, so a test waits seconds, not the default minute.
  std::ofstream config(directory_ / "prometheus.yml");
  config << "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n";
  config << "rule_files:\n";
  for (const auto& file : rule_files) config << "  - " << std::filesystem::absolute(file).string() << "\n";
  config << "scrape_configs:\n  - job_name: boxcar\n    static_configs:\n";
  for (const auto& target : targets)
    config << "      - targets: ['127.0.0.1:" << target.port << "']\n        labels: {role: " << target.role << "}\n";
  config.close();

  const std::string program = binary();
  if (program.empty()) throw std::runtime_error("prometheus is not installed (Debian package prometheus)");
  port_ = free_port_below_ephemeral();
  process_ = std::make_unique<ChildProcess>(
      program,
      std::vector<std::string>{"--config.file=" + (directory_ / "prometheus.yml").string(),
                               "--storage.tsdb.path=" + (directory_ / "data").string(),
                               "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"},
      std::vector<std::string>{"HOME=" + directory_.string()});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (true) {
    try {
      if (http_get(port_, "/-/ready").status == 200) return;
    } catch (const std::exception&) {
      // not listening yet
    }
    if (process_->wait(std::chrono::milliseconds(200)) || std::chrono::steady_clock::now() > deadline) {
      const std::string text = "prometheus did not become ready on port " + std::to_string(port_) + ":\n" + output();
      process_.reset();
      std::filesystem::remove_all(directory_);
      throw std::runtime_error(text);
    }
  }
}

PrometheusServer::~PrometheusServer() {
  process_->signal(SIGTERM);
  process_->wait(std::chrono::seconds(10));
  process_.reset();  // SIGKILLs it if it still runs
  std::error_code ignored;
  std::filesystem::remove_all(directory_, ignored);
}

nlohmann::json PrometheusServer::api(const std::string& path_and_query) const {
  const HttpResponse response = http_get(port_, path_and_query);
  try {
    return nlohmann::json::parse(body_of(response));
  } catch (const nlohmann::json::exception&) {
    throw std::runtime_error("prometheus answered " + path_and_query + " with HTTP " + std::to_string(response.status) +
                             ": " + response.body);
  }
}

nlohmann::json PrometheusServer::query(const std::string& promql) const {
  return api("/api/v1/query?query=" + url_encode(promql));
}

std::vector<std::string> PrometheusServer::metric_names() const {
  return api("/api/v1/label/__name__/values").at("data").get<std::vector<std::string>>();
}

}  // namespace boxcar::testing
