// The per-address counter behind ServerOptions::max_connections_per_client.
#include "client_limiter.hpp"

namespace webhook {

bool ClientLimiter::try_enter(std::string_view address) {
  if (max_per_client_ == 0) return true;
  const std::lock_guard lock(mutex_);
  std::size_t& count = in_flight_[std::string(address)];
  if (count >= max_per_client_) return false;  // count > 0 here, so no empty entry is left behind
  ++count;
  return true;
}

void ClientLimiter::leave(std::string_view address) {
  if (max_per_client_ == 0) return;
  const std::lock_guard lock(mutex_);
  const auto found = in_flight_.find(std::string(address));
  if (found == in_flight_.end()) return;
  if (--found->second == 0) in_flight_.erase(found);
}

std::size_t ClientLimiter::in_flight(std::string_view address) const {
  const std::lock_guard lock(mutex_);
  const auto found = in_flight_.find(std::string(address));
  return found == in_flight_.end() ? 0 : found->second;
}

}  // namespace webhook
