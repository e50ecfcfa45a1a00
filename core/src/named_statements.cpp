// The core's named statements, for the test that prepares every component's SQL.
// DDL (CREATE, ALTER, DROP, RESET) cannot be PREPAREd: core_unprepared_statements() lists it.
#include "boxcar/core/detail/named_statements.hpp"

#include "core_queries.hpp"

namespace boxcar::detail {

std::vector<NamedStatement> core_statements() {
  return {{"core.migrate_try_lock", core_sql::kMigrateTryLock},
          {"core.migrate_unlock", core_sql::kMigrateUnlock},
          {"core.migrate_lock_held", core_sql::kMigrateLockHeld},
          {"core.migrate_lock_holders", core_sql::kMigrateLockHolders},
          {"core.set_application_name", core_sql::kSetApplicationName},
          {"core.set_lock_timeout", core_sql::kSetLockTimeout},
          {"core.set_search_path", core_sql::kSetSearchPath},
          {"core.relation_lock_holders", core_sql::kRelationLockHolders},
          {"core.column_exists", core_sql::kColumnExists},
          {"core.public_may_create", core_sql::kPublicMayCreate},
          {"core.migrations_table_exists", core_sql::kMigrationsTableExists},
          {"core.applied_migrations", core_sql::kAppliedMigrations},
          {"core.applied_migrations_legacy", core_sql::kAppliedMigrationsLegacy},
          {"core.record_migration", core_sql::kRecordMigration},
          {"core.index_invalid", core_sql::kIndexInvalid},
          {"core.notify_many", core_sql::kNotifyMany}};
}

std::vector<NamedStatement> core_unprepared_statements() {
  return {{"core.create_schema", core_sql::kCreateSchema},
          {"core.create_migrations_table", core_sql::kCreateMigrationsTable},
          {"core.add_compatible_with", core_sql::kAddCompatibleWith},
          {"core.reset_search_path", core_sql::kResetSearchPath},
          {"core.drop_index_concurrently", core_sql::kDropIndexConcurrently},
          {"core.reset_session", core_sql::kResetSession},
          {"core.commit_and_reset_session", core_sql::kCommitAndResetSession}};
}

}  // namespace boxcar::detail
