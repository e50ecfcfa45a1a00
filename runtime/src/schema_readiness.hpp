// The schema input of readiness, kept apart from the database input and the verdict's
// assembly: which applied schemas this build may serve. Every migration it embeds must be
// applied; a newer schema passes when its newer migrations are marked compatible with this
// build, so old replicas stay in service during a rolling deploy (docs/operations.md).
#pragma once

#include <optional>
#include <string>

#include "boxcar/core/migrate.hpp"

namespace boxcar::detail {

struct SchemaReadiness {
  bool ok = false;
  /// Why not, for the readiness detail; empty when ok.
  std::string why{};
};

/// Judges what the database reported; nullopt (the database did not answer) is not ok,
/// since the schema cannot be confirmed.
SchemaReadiness schema_readiness(const std::optional<SchemaCompatibility>& schema);

}  // namespace boxcar::detail
