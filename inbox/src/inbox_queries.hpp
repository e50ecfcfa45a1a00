// Every SQL statement of the inbox's accept path. `{schema}` is replaced by the quoted
// schema name once, when an Inbox is constructed; values are always $n parameters.
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
#pragma once

namespace boxcar::inbox_sql {

// Autocommit: the insert is its own transaction, so accept() costs one round trip when
// the identity is new. ON CONFLICT waits for a concurrent inserter of the same identity
// and then does nothing.
inline constexpr const char* kInsert = R"sql(
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id,
     event_type, schema_version, payload, metadata, fingerprint)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10)
ON CONFLICT (consumer, source, scope_kind, scope_id, message_id) DO NOTHING
RETURNING id, status
)sql";

// A separate statement, hence a fresh snapshot under READ COMMITTED: it sees the row
// that made the insert do nothing (a lookup inside the insert's statement may not).
inline constexpr const char* kLookup = R"sql(
SELECT id, status, fingerprint
FROM {schema}.inbox_receipts
WHERE consumer = $1
  AND source = $2
  AND scope_kind = $3
  AND scope_id = $4
  AND message_id = $5
)sql";

// accept_many: every new identity of the batch in one statement. $1 is a JSON array of
// {"i","sk","si","src","c","m","et","sv","p","md","fp"} records sorted by identity; the
// function scan yields them in array order and the insert takes them in that order, so
// concurrent batches lock identities in one order (no ORDER BY: sorting by the input
// position "i" would undo it).
inline constexpr const char* kInsertMany = R"sql(
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id,
     event_type, schema_version, payload, metadata, fingerprint)
SELECT b.sk, b.si, b.src, b.c, b.m, b.et, b.sv, b.p, b.md, b.fp
FROM pg_catalog.jsonb_to_recordset($1::jsonb)
    AS b(i integer, sk text, si text, src text, c text, m text,
         et text, sv integer, p jsonb, md jsonb, fp text)
ON CONFLICT (consumer, source, scope_kind, scope_id, message_id) DO NOTHING
RETURNING id, status, scope_kind, scope_id, source, consumer, message_id
)sql";

// accept_many: the stored rows for identities the insert did nothing for.
inline constexpr const char* kLookupMany = R"sql(
SELECT b.i, r.id, r.status, r.fingerprint
FROM pg_catalog.jsonb_to_recordset($1::jsonb)
    AS b(i integer, sk text, si text, src text, c text, m text)
JOIN {schema}.inbox_receipts AS r
  ON r.consumer = b.c
 AND r.source = b.src
 AND r.scope_kind = b.sk
 AND r.scope_id = b.si
 AND r.message_id = b.m
)sql";

}  // namespace boxcar::inbox_sql
