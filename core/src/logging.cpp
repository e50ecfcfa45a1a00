// Creation of Boxcar's named loggers and the field encoding of log_event().
#include "boxcar/core/logging.hpp"
#include "boxcar/core/detail/log_fields.hpp"

#include <atomic>
#include <mutex>

#include <spdlog/spdlog.h>

namespace boxcar {
namespace {
std::atomic<bool> json_fields{false};

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::Debug:
      return spdlog::level::debug;
    case LogLevel::Info:
      return spdlog::level::info;
    case LogLevel::Warn:
      return spdlog::level::warn;
    case LogLevel::Error:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}
}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::default_logger()->clone(name);
  spdlog::register_logger(created);
  return created;
}

void set_json_log_fields(bool enabled) noexcept { json_fields = enabled; }

void log_event(spdlog::logger& log, LogLevel level, std::string_view message, std::initializer_list<LogField> fields) {
  const auto spd = to_spdlog(level);
  if (!log.should_log(spd)) return;
  std::string line(message);
  if (json_fields) {
    // message, then start, then key SEP value SEP key SEP value: the JSON formatter
    // writes them as separate keys.
    line += detail::kLogFieldsStart;
    bool first = true;
    for (const auto& field : fields) {
      if (!first) line += detail::kLogFieldSeparator;
      first = false;
      line.append(field.key);
      line += detail::kLogFieldSeparator;
      line += field.value;
    }
  } else {
    for (const auto& field : fields) {
      line += ' ';
      line.append(field.key);
      line += '=';
      line += field.value;
    }
  }
  log.log(spd, "{}", line);
}

}  // namespace boxcar
