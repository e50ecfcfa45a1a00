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
  std::string line;
  if (json_fields) {
    // message, then start, then key SEP value SEP key SEP value, each already JSON-escaped
    // (so none holds a separator): the JSON formatter writes them as separate keys.
    line = detail::json_escaped(message);
    line += detail::kLogFieldsStart;
    bool first = true;
    for (const auto& field : fields) {
      if (!first) line += detail::kLogFieldSeparator;
      first = false;
      line += detail::json_escaped(field.key);
      line += detail::kLogFieldSeparator;
      line += detail::json_escaped(field.value);
    }
  } else {
    // Escaped here, not only in the runtime's formatter, so an application's own sinks
    // get lines a sender cannot split or extend either.
    line = detail::escape_control_characters(message);
    for (const auto& field : fields) {
      line += ' ';
      line += detail::escape_control_characters(field.key);
      line += '=';
      line += detail::escape_text_field(field.value);
    }
  }
  log.log(spdlog::source_loc{detail::kLogEventSource, 0, nullptr}, spd, "{}", line);
}

}  // namespace boxcar
