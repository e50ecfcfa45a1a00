// Full-jitter exponential backoff.
#include "boxcar/core/backoff.hpp"

#include <algorithm>

#include <random>

namespace boxcar {

std::chrono::milliseconds backoff_ceiling(const BackoffOptions& options, int attempt) {
  const auto cap = options.cap.count();
  long long ceiling = options.base.count();
  for (int i = 1; i < attempt && ceiling < cap; ++i) ceiling *= 2;
  return std::chrono::milliseconds(std::min<long long>(ceiling, cap));
}

std::chrono::milliseconds backoff_delay(const BackoffOptions& options, int attempt) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const auto ceiling = backoff_ceiling(options, attempt).count();
  std::uniform_int_distribution<long long> pick(0, ceiling);
  return std::chrono::milliseconds(pick(rng));
}

}  // namespace boxcar
