// Named spdlog loggers ("inbox", "worker", "publisher"), each a clone of the default
// logger's sinks, so an application configures output once; and log_event(), one line
// per event with named fields (consumer, message_id, event_id, attempt, outcome, ...)
// that the JSON log format turns into separate JSON keys.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/fwd.h>

namespace boxcar {

/// The logger called `name`, created from spdlog's default logger on first use.
/// Thread-safe.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

enum class LogLevel { Debug, Info, Warn, Error };

struct LogField {
  std::string_view key;
  std::string value;
};

/// Logs `message` with `fields`. Text format: `message key=value key=value`, a value
/// that holds a space, '=', a quote, a backslash or a control character written as
/// key="..." with escapes. JSON format (set_json_log_fields(true), done by the runtime
/// host for log.format=json): each field becomes its own key beside "message". Control
/// characters are escaped in both, so a field from a sender cannot start a new line or
/// add a field (detail/log_fields.hpp). Payloads do not belong in fields.
void log_event(spdlog::logger& log, LogLevel level, std::string_view message, std::initializer_list<LogField> fields);

/// Whether log_event() encodes fields for the JSON line format.
void set_json_log_fields(bool enabled) noexcept;

}  // namespace boxcar
