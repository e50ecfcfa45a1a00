// UUIDv7 (RFC 9562): 48-bit Unix milliseconds, then random bits. Time-ordered, so
// event ids sort roughly by emission and index well.
#pragma once

#include <string>

namespace boxcar {

/// A new UUIDv7 in canonical lower-case text form (8-4-4-4-12). Within one process, ids
/// made in the same millisecond still sort in creation order. Thread-safe.
std::string uuid_v7();

/// True when `text` is a canonical lower-case UUID with version 7 and the RFC variant.
bool is_uuid_v7(const std::string& text) noexcept;

}  // namespace boxcar
