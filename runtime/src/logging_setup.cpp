// spdlog set-up: a custom flag escapes the message for the JSON line format.
#include "logging_setup.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include "boxcar/core/error.hpp"
#include "boxcar/core/logging.hpp"
#include "boxcar/core/detail/log_fields.hpp"

namespace boxcar::detail {
namespace {

void append_escaped(std::string_view text, spdlog::memory_buf_t& dest) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      dest.push_back('\\');
      dest.push_back(c);
    } else if (u < 0x20) {
      const char escaped[] = {'\\', 'u', '0', '0', kHex[u >> 4], kHex[u & 0xF]};
      dest.append(escaped, escaped + 6);
    } else {
      dest.push_back(c);
    }
  }
}

// Writes the JSON-escaped message; for a log_event() line also closes the message string
// and writes each field as its own string key (the pattern's closing quote ends the last).
class JsonMessageAndFields final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    const auto start = payload.find(detail::kLogFieldsStart);
    append_escaped(payload.substr(0, start), dest);
    if (start == std::string_view::npos) return;
    std::string_view rest = payload.substr(start + 1);
    if (rest.empty()) return;
    bool is_key = true;
    while (true) {
      const auto end = rest.find(detail::kLogFieldSeparator);
      const std::string_view part = rest.substr(0, end);
      if (is_key) {
        dest.append(std::string_view("\",\""));
        append_escaped(part, dest);
        dest.append(std::string_view("\":\""));
      } else {
        append_escaped(part, dest);
      }
      is_key = !is_key;
      if (end == std::string_view::npos) break;
      rest = rest.substr(end + 1);
    }
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonMessageAndFields>(); }
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
  }
  set_json_log_fields(format == "json");
}

}  // namespace boxcar::detail
