// Creation of Boxcar's named loggers.
#include "boxcar/runtime/logging.hpp"

#include <mutex>

#include <spdlog/spdlog.h>

namespace boxcar {

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
  static std::mutex mutex;
  std::lock_guard lock(mutex);
  if (auto existing = spdlog::get(name)) return existing;
  auto created = spdlog::default_logger()->clone(name);
  spdlog::register_logger(created);
  return created;
}

}  // namespace boxcar
