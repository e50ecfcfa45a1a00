// One embedded migration file and the directives in its comments, which tell the runner
// how to apply it. Not public API; parsed here so a unit test can check every file.
//
//   -- boxcar:no-transaction          run outside a transaction (one statement: CREATE
//                                     INDEX CONCURRENTLY IF NOT EXISTS, or another
//                                     statement PostgreSQL refuses inside a transaction)
//   -- boxcar:compatible-with N       a binary whose newest migration is N or later runs
//                                     correctly against a schema with this one applied
//                                     (default: this file's own version)
//   -- boxcar:previous-checksum SHA   an earlier text of this file that installations may
//                                     have recorded; accepted as applied
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace boxcar::detail {

struct MigrationFile {
  int version = 0;
  std::string name;
  std::string_view sql;
  std::string checksum;  // SHA-256 of the text, as recorded in schema_migrations
  bool transactional = true;
  int compatible_with = 0;
  std::vector<std::string> previous_checksums{};
  // The index a no-transaction CREATE INDEX CONCURRENTLY builds: the runner drops an
  // INVALID leftover of it (a failed earlier build) before building again.
  std::string concurrent_index{};
};

/// Parses `sql` (the text of `file_name`, "0005_x.sql").
/// @throws MigrationError MIGRATION_MALFORMED naming the file and the offending directive.
MigrationFile parse_migration_file(std::string_view file_name, std::string_view sql);

/// Every embedded migration, parsed, ordered by version.
/// @throws MigrationError MIGRATION_MALFORMED
std::vector<MigrationFile> embedded_migrations();

/// The statement text of `sql` without comment lines and surrounding blanks.
std::string strip_sql_comments(std::string_view sql);

}  // namespace boxcar::detail
