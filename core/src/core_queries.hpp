// The core's own SQL: the migration runner's lock and the notifier. Values are $n.
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

}  // namespace boxcar::detail::core_sql
