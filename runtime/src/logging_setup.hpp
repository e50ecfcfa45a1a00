// Process-wide log configuration from RuntimeConfig: level, and plain text or one JSON
// object per line (message JSON-escaped, so a log shipper can parse every line).
#pragma once

#include <string>

namespace boxcar::detail {

/// @throws ConfigError("log.level") for an unknown level.
void configure_logging(const std::string& format, const std::string& level);

}  // namespace boxcar::detail
