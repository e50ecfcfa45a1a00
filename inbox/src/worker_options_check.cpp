// Validation of a Worker's options and handler registrations.
#include "worker_options_check.hpp"

#include <algorithm>
#include <set>

#include "boxcar/core/error.hpp"
#include "boxcar/core/sql_identifier.hpp"

namespace boxcar::detail {

std::map<std::string, HandlerEntry> validate_worker(const WorkerOptions& options,
                                                    const std::vector<HandlerRegistration>& handlers,
                                                    std::vector<std::string>& owned) {
  validate_schema_name(options.schema, "schema");
  const std::set<std::string> declared(options.consumers.begin(), options.consumers.end());
  std::map<std::string, HandlerEntry> by_consumer;
  for (const auto& registration : handlers) {
    if (!registration.handler && !registration.batch_handler)
      throw ConfigError("handlers", "the handler registered for '" + registration.consumer +
                                        "' is null (set handler, batch_handler, or both)");
    if (!declared.contains(registration.consumer))
      throw ConfigError("handlers", "a handler is registered for consumer '" + registration.consumer +
                                        "', which the module does not declare");
    if (registration.supports.empty())
      throw ConfigError(
          "handlers", "the handler of '" + registration.consumer + "' declares no (event type, schema version) pairs");
    if (!by_consumer
             .emplace(registration.consumer,
                      HandlerEntry{registration.handler, registration.supports, registration.batch_handler})
             .second)
      throw ConfigError("handlers", "two handlers are registered for consumer '" + registration.consumer + "'");
  }
  if (!options.enabled) return by_consumer;
  if (options.owned_consumers.empty()) {
    // No explicit list: the worker owns every declared consumer, so a forgotten handler
    // fails here instead of leaving that consumer's backlog PENDING forever.
    if (options.consumers.empty())
      throw ConfigError("worker.consumers",
                        "the worker would own no consumer: the module declares none "
                        "(declare its consumers, or set worker.enabled = false)");
    for (const auto& consumer : options.consumers) {
      if (!by_consumer.contains(consumer))
        throw ConfigError("worker.consumers",
                          "consumer '" + consumer +
                              "' has no registered handler, and an enabled worker without "
                              "a worker.consumers list owns every declared consumer: register its handler, list "
                              "the consumers this worker owns in worker.consumers, or set worker.enabled = false");
      if (std::find(owned.begin(), owned.end(), consumer) == owned.end()) owned.push_back(consumer);
    }
  } else {
    for (const auto& consumer : options.owned_consumers) {
      if (!declared.contains(consumer))
        throw ConfigError("worker.consumers", "'" + consumer + "' is not a consumer the module declares");
      if (!by_consumer.contains(consumer))
        throw ConfigError("worker.consumers", "'" + consumer + "' has no registered handler");
      if (std::find(owned.begin(), owned.end(), consumer) == owned.end()) owned.push_back(consumer);
    }
  }
  if (!options.tenant_setting.empty() && !is_custom_setting_name(options.tenant_setting))
    throw ConfigError("worker.tenant_setting",
                      "expects a custom setting name such as app.tenant_id, got '" + options.tenant_setting + "'");
  if (options.concurrency == 0) throw ConfigError("worker.concurrency", "must be at least 1");
  if (options.batch_size == 0) throw ConfigError("worker.batch_size", "must be at least 1");
  if (options.claim_limit == 0) throw ConfigError("worker.claim_limit", "must be at least 1");
  if (options.max_attempts < 1) throw ConfigError("worker.max_attempts", "must be at least 1");
  if (options.max_outage_hand_backs < 0) throw ConfigError("worker.max_outage_hand_backs", "must be 0 or more");
  if (options.handler_timeout <= std::chrono::milliseconds(0))
    throw ConfigError("worker.handler_timeout_ms", "must be positive");
  // Also for batch_size > 1: a batch's deadline is handler_timeout, and the one-message
  // transactions that re-run a failed or timed-out batch renew the leases of the waiting
  // receipts before each, so no lease has to cover more than one transaction.
  if (options.lease < options.handler_timeout + std::chrono::seconds(1))
    throw ConfigError("worker.lease_ms",
                      "must exceed worker.handler_timeout_ms by at least 1 s, so a claim "
                      "cannot expire while its transaction may still commit");
  if (options.backoff.base.count() < 0) throw ConfigError("worker.backoff_base_ms", "must be 0 or more");
  if (options.backoff.cap < options.backoff.base)
    throw ConfigError("worker.backoff_cap_ms", "must be at least worker.backoff_base_ms");
  return by_consumer;
}

bool check_worker_pool(const ConnectionPool& pool, const WorkerOptions& options) {
  if (options.enabled && pool.options().size < options.concurrency + 1)
    throw ConfigError("pool.size", "must be at least worker.concurrency + 1 (" +
                                       std::to_string(options.concurrency + 1) + "), is " +
                                       std::to_string(pool.options().size));
  return true;
}

}  // namespace boxcar::detail
