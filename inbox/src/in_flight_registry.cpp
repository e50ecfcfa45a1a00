// The registry of running handler attempts.
#include "in_flight_registry.hpp"

namespace boxcar::detail {

std::size_t InFlightRegistry::add(Entry entry) {
  std::lock_guard lock(mutex_);
  if (cancelled_) entry.source->cancel();
  entries_.emplace(next_, Running{entry, std::this_thread::get_id()});
  return next_++;
}

bool InFlightRegistry::remove(std::size_t key) {
  std::lock_guard lock(mutex_);
  const auto it = entries_.find(key);
  if (it == entries_.end()) return false;
  const bool abandoned = it->second.abandoned;
  entries_.erase(it);
  return abandoned;
}

void InFlightRegistry::cancel_signals() {
  std::lock_guard lock(mutex_);
  cancelled_ = true;
  for (auto& [key, running] : entries_) running.entry.source->cancel();
}

void InFlightRegistry::resume() {
  std::lock_guard lock(mutex_);
  cancelled_ = false;
}

void InFlightRegistry::cancel_queries() {
  std::lock_guard lock(mutex_);
  for (auto& [key, running] : entries_) {
    try {
      running.entry.connection->cancel_query();
    } catch (...) {
      // The query may have ended meanwhile, or the session is gone.
    }
  }
}

std::size_t InFlightRegistry::size() const {
  std::lock_guard lock(mutex_);
  std::size_t n = 0;
  for (const auto& [key, running] : entries_) n += running.abandoned ? 0 : 1;
  return n;
}

std::vector<std::thread::id> InFlightRegistry::overdue(Clock::time_point cutoff) const {
  std::lock_guard lock(mutex_);
  std::vector<std::thread::id> threads;
  for (const auto& [key, running] : entries_)
    if (!running.abandoned && running.entry.deadline < cutoff) threads.push_back(running.thread);
  return threads;
}

std::optional<InFlightRegistry::Abandoned> InFlightRegistry::abandon(
    std::thread::id thread, const std::function<void(pqxx::connection&)>& while_alive) {
  std::lock_guard lock(mutex_);
  for (auto& [key, running] : entries_) {
    if (running.thread != thread || running.abandoned) continue;
    running.abandoned = true;
    if (running.entry.connection) while_alive(*running.entry.connection);
    return Abandoned{.session = running.entry.session};
  }
  return std::nullopt;
}

}  // namespace boxcar::detail
