// The database input of readiness: one session kept open across checks, reopened only
// after it failed, so a readiness check costs a round trip, not a connection. It reads
// the applied migrations, which the schema input judges (schema_readiness.hpp).
//
// Thread-safety: none; the readiness monitor's thread is its only caller.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include <pqxx/connection>

#include "boxcar/core/migrate.hpp"

namespace boxcar::detail {

class DatabaseProbe {
 public:
  /// `connection_string` as the pool uses it (its connect_timeout, keepalives and
  /// tcp_user_timeout bound a check against an unresponsive server). Connects lazily.
  DatabaseProbe(std::string connection_string, std::string schema);

  struct Result {
    /// The applied schema as this build sees it; nullopt when the database did not answer.
    std::optional<SchemaCompatibility> schema;
    /// Why the database did not answer; empty when it did.
    std::string error;
  };
  /// One round trip on the kept session (connecting first when there is none). Never throws.
  Result probe() noexcept;

 private:
  const std::string connection_string_;
  const std::string schema_;
  std::unique_ptr<pqxx::connection> connection_;
};

}  // namespace boxcar::detail
