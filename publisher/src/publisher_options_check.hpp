// The checks PublisherOptions must pass before a Publisher exists, each failure a
// ConfigError naming the configuration key.
#pragma once

#include <string>

#include "boxcar/publisher/publisher.hpp"

namespace boxcar::detail {

/// Returns the validated schema name.
/// @throws ConfigError whose key() names the first option that is out of range.
std::string check_publisher_options(const ConnectionPool* pool, const PublisherOptions& options);

}  // namespace boxcar::detail
