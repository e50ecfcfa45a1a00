// The numbered SQL migrations of migrations/, embedded at build time.
#pragma once

#include <span>
#include <string_view>

namespace boxcar::detail {

struct EmbeddedMigration {
  std::string_view file_name;  // "0001_inbox.sql"; the leading number is the version
  std::string_view sql;        // schema-agnostic: runs with search_path set to the target schema
};

/// Every migration file, ordered by version.
std::span<const EmbeddedMigration> embedded_migration_files();

}  // namespace boxcar::detail
