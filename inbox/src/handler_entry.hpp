// A consumer's registered handler, as the worker keeps it, and the bounded event_type
// label its outcomes are counted under.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "boxcar/inbox/worker.hpp"

namespace boxcar::detail {

struct HandlerEntry {
  /// The plain handler; for a batch consumer, its optional per-message fallback.
  std::shared_ptr<InboxHandler> handler;
  std::vector<EventVersion> supports;
  /// Set for a batch consumer (docs/worker.md, "Batch handlers").
  std::shared_ptr<InboxBatchHandler> batch_handler{};
  bool supports_pair(const std::string& event_type, int schema_version) const;
};

/// The event_type label value for event types no handler of the consumer lists.
inline constexpr const char* kUnsupportedEventTypeLabel = "(unsupported)";

/// The event_type label of boxcar_inbox_processed_total: `event_type` when the handler of
/// `consumer` lists it in its supports (any schema version), else "(unsupported)". Senders
/// choose event types; labels come only from configuration, so random types cannot grow
/// the number of series (docs/security.md, section 5). Returns `event_type` or a static.
const std::string& event_type_label(const std::map<std::string, HandlerEntry>& handlers, const std::string& consumer,
                                    const std::string& event_type);

}  // namespace boxcar::detail
