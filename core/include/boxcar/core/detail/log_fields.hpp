// The separators log_event() uses in JSON mode: core encodes fields with them and the
// runtime's JSON formatter decodes them. Not public API.
#pragma once

namespace boxcar::detail {

inline constexpr char kLogFieldsStart = '\x1e';
inline constexpr char kLogFieldSeparator = '\x1f';

}  // namespace boxcar::detail
