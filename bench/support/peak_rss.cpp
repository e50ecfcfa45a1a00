// Spawning a probe and reading back the peak RSS it reports.
#include "peak_rss.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <stdexcept>
#include <string>

extern char** environ;

namespace boxcar::bench {

namespace {
constexpr const char* kReportPrefix = "probe_peak_rss_kib ";
}

long self_peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stol(line.substr(6));  // "VmHWM:  12345 kB"
  return 0;
}

void print_peak_rss_line() { std::cout << kReportPrefix << self_peak_rss_kib() << std::endl; }

double run_probe_peak_mib(const std::vector<std::string>& argv) {
  int out[2];
  if (pipe(out) != 0) throw std::runtime_error("rss probe: pipe failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out[0]);
  posix_spawn_file_actions_addclose(&actions, out[1]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    throw std::runtime_error("rss probe: cannot start " + argv[0]);
  }
  std::string output;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) output.append(buffer, static_cast<std::size_t>(n));
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  const auto at = output.rfind(kReportPrefix);
  std::cerr << output.substr(0, at == std::string::npos ? output.size() : at);  // anything else it printed
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || at == std::string::npos)
    throw std::runtime_error("rss probe " + argv[1] + " failed (status " + std::to_string(status) + ")");
  return std::stod(output.substr(at + std::string(kReportPrefix).size())) / 1024.0;
}

void print_rss_line(const std::string& name, double value_mib, int limit_mib) {
  std::cout << "rss " << name << ' ' << std::fixed << std::setprecision(1) << value_mib << ' ' << limit_mib << '\n';
}

}  // namespace boxcar::bench
