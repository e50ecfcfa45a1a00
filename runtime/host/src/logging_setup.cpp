// spdlog set-up: a custom flag escapes the message for the JSON line format.
#include "logging_setup.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include "boxcar/runtime/error.hpp"

namespace boxcar::detail {
namespace {

class JsonEscapedMessage final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr char kHex[] = "0123456789abcdef";
    for (const char c : msg.payload) {
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
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JsonEscapedMessage>(); }
};

}  // namespace

void configure_logging(const std::string& format, const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") throw ConfigError("log.level", "unknown level '" + level + "'");
  spdlog::set_level(parsed);
  if (format == "json") {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonEscapedMessage>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%f%z","level":"%l","logger":"%n","thread":%t,"message":"%*"})");
    spdlog::set_formatter(std::move(formatter));
  }
}

}  // namespace boxcar::detail
