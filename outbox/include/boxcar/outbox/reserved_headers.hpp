// The Kafka header names the publisher sets on every record from the event's own fields.
// One definition: the emitter rejects them as custom headers (use the EmitOptions field
// instead), the publisher writes them, and consumers read them (`event_id` is the
// deduplication key).
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace boxcar::headers {

inline constexpr std::string_view kEventId = "event_id";
inline constexpr std::string_view kEventType = "event_type";
inline constexpr std::string_view kSchemaVersion = "schema_version";
inline constexpr std::string_view kTenantScope = "tenant_scope";
/// Only on tenant events.
inline constexpr std::string_view kTenantId = "tenant_id";
/// The next three only when the emit gave them.
inline constexpr std::string_view kCausationId = "causation_id";
inline constexpr std::string_view kCorrelationId = "correlation_id";
inline constexpr std::string_view kTraceparent = "traceparent";

inline constexpr std::array<std::string_view, 8> kReserved = {kEventId,  kEventType,   kSchemaVersion, kTenantScope,
                                                              kTenantId, kCausationId, kCorrelationId, kTraceparent};

/// True for a name the publisher sets itself.
constexpr bool is_reserved(std::string_view name) noexcept {
  return std::find(kReserved.begin(), kReserved.end(), name) != kReserved.end();
}

}  // namespace boxcar::headers
