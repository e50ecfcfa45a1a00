// Named spdlog loggers ("inbox", "worker", "publisher"), each a clone of the default
// logger's sinks, so an application configures output once.
#pragma once

#include <memory>
#include <string>

#include <spdlog/fwd.h>

namespace boxcar {

/// The logger called `name`, created from spdlog's default logger on first use.
/// Thread-safe.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

}  // namespace boxcar
