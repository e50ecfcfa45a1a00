// The core's own SQL: the migration runner's lock, the notifier and the pool's session
// reset. Values are $n.
#pragma once

namespace boxcar::detail::core_sql {

// Different schemas migrate independently; one schema's runners queue up. $1 = schema.
inline constexpr const char* kMigrateLock = "SELECT pg_advisory_lock(hashtextextended('boxcar.migrate:' || $1, 0))";
inline constexpr const char* kMigrateUnlock = "SELECT pg_advisory_unlock(hashtextextended('boxcar.migrate:' || $1, 0))";

// One NOTIFY per payload of $2 (a text[] literal) on channel $1, in one statement.
// pg_catalog.unnest: an unqualified unnest(text[]) would resolve to any public.unnest(text[])
// a role with CREATE on public planted (docs/schema.md, "search_path").
inline constexpr const char* kNotifyMany =
    "SELECT pg_catalog.pg_notify($1, payload) FROM pg_catalog.unnest($2::text[]) AS payload";

// Run on a pooled connection whose loan may have run application code, before it is
// reused: what DISCARD ALL does, minus DEALLOCATE ALL and DISCARD PLANS, in one round trip
// (DISCARD ALL itself cannot run in the implicit transaction of a multi-statement string).
// Prepared statements stay: libpqxx 6.4 remembers which ones it registered and would
// never re-prepare them after a DEALLOCATE it did not issue itself. The last statement
// lists them so the pool can check that the server holds exactly the ones libpqxx knows.
// SET SESSION AUTHORIZATION DEFAULT comes first: it is always allowed (it returns to the
// authenticated user) and gives RESET ALL its privileges back after a SET ROLE.
inline constexpr const char* kResetSession =
    "CLOSE ALL;\n"
    "SET SESSION AUTHORIZATION DEFAULT;\n"
    "RESET ROLE;\n"
    "RESET ALL;\n"
    "UNLISTEN *;\n"
    "SELECT pg_catalog.pg_advisory_unlock_all();\n"
    "DISCARD TEMP;\n"
    "DISCARD SEQUENCES;\n"
    "SELECT name FROM pg_catalog.pg_prepared_statements";

}  // namespace boxcar::detail::core_sql
