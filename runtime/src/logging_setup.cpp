// spdlog set-up: custom flags escape the message for the JSON line format and the text one.
#include "logging_setup.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/detail/log_fields.hpp"

namespace boxcar::detail {
namespace {

void append(spdlog::memory_buf_t& dest, const std::string& text) {
  dest.append(text.data(), text.data() + text.size());
}

// Writes the message for the JSON line format. A log_event() line (marked by its
// source_loc, which message text cannot forge) arrives JSON-escaped, separators between
// its parts: the flag closes the message string and writes each field as its own key
// (the pattern's closing quote ends the last). Any other line is escaped whole, so a
// separator byte inside it stays text.
class JsonMessageAndFields final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    if (msg.source.filename != kLogEventSource) {
      append(dest, json_escaped(payload));
      return;
    }
    const auto start = payload.find(kLogFieldsStart);
    dest.append(payload.substr(0, start));
    if (start == std::string_view::npos) return;
    std::string_view rest = payload.substr(start + 1);
    if (rest.empty()) return;
    bool is_key = true;
    while (true) {
      const auto end = rest.find(kLogFieldSeparator);
      const std::string_view part = rest.substr(0, end);
      if (is_key) {
        dest.append(std::string_view("\",\""));
        dest.append(part);
        dest.append(std::string_view("\":\""));
      } else {
        dest.append(part);
      }
      is_key = !is_key;
      if (end == std::string_view::npos) break;
      rest = rest.substr(end + 1);
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessageAndFields>(); }
};

// Writes the message for the text format with control characters escaped: a message
// that formatted a sender's value in (a message id, a handler's error) stays one line.
class EscapedTextMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    append(dest, escape_control_characters(std::string_view(msg.payload.data(), msg.payload.size())));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<EscapedTextMessage>(); }
};

// "[name] " for a named logger, nothing for the default one: spdlog's own layout.
class LoggerName final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    if (msg.logger_name.size() == 0) return;
    dest.push_back('[');
    dest.append(msg.logger_name.data(), msg.logger_name.data() + msg.logger_name.size());
    dest.append(std::string_view("] "));
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<LoggerName>(); }
};

}  // namespace

void configure_logging(const std::string& format, const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") throw ConfigError("log.level", "unknown level '" + level + "'");
  spdlog::set_level(parsed);
  if (format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonMessageAndFields>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","logger":"%n","thread":%t,"message":"%*"})");
    spdlog::set_formatter(std::move(formatter));
  } else {
    // spdlog's default layout, with the message escaped.
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<LoggerName>('&').add_flag<EscapedTextMessage>('*').set_pattern(
        "[%Y-%m-%d %H:%M:%S.%e] %&[%^%l%$] %*");
    spdlog::set_formatter(std::move(formatter));
  }
  set_json_log_fields(format == "json");
}

}  // namespace boxcar::detail
