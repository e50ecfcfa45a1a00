// The schema input of readiness, kept apart from the database input and the verdict's
// assembly: which applied schema versions this build may serve. Today: exactly the
// newest migration it embeds. (Accepting a newer, compatible schema during a rolling
// upgrade changes this function only.)
#pragma once

#include <optional>
#include <string>

namespace boxcar::detail {

struct SchemaReadiness {
  bool ok = false;
  /// Why not, for the readiness detail; empty when ok.
  std::string why{};
};

/// Judges the applied migration version; nullopt (the database did not answer) is not
/// ok, since the schema cannot be confirmed.
SchemaReadiness schema_readiness(std::optional<int> applied_version);

}  // namespace boxcar::detail
