// Validation of a Worker's options and handler registrations, before anything starts:
// every misconfiguration is a ConfigError naming its key (docs/worker.md, "Rules").
#pragma once

#include <map>
#include <string>
#include <vector>

#include "boxcar/core/connection_pool.hpp"
#include "boxcar/inbox/worker.hpp"
#include "handler_entry.hpp"

namespace boxcar::detail {

/// The handlers by consumer; `owned` receives the consumers the worker claims (every
/// declared consumer without worker.consumers). @throws ConfigError naming the key.
std::map<std::string, HandlerEntry> validate_worker(const WorkerOptions& options,
                                                    const std::vector<HandlerRegistration>& handlers,
                                                    std::vector<std::string>& owned);

/// Handler threads and the dispatcher's claims share the pool: a smaller pool than
/// concurrency + 1 would starve them into DATABASE_POOL_TIMEOUT failures that look like
/// handler errors. @throws ConfigError("pool.size"); returns true.
bool check_worker_pool(const ConnectionPool& pool, const WorkerOptions& options);

}  // namespace boxcar::detail
