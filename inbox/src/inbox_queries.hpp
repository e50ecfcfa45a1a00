// Every SQL statement of the inbox's accept path. `{schema}` is replaced by the quoted
// schema name once, when an Inbox is constructed; values are always $n parameters.
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
#pragma once

#include "boxcar/core/detail/sql_concat.hpp"

namespace boxcar::inbox_sql {

// Autocommit: the insert is its own transaction, so accept() costs one round trip when
// the identity is new. ON CONFLICT waits for a concurrent inserter of the same identity
// and then does nothing. $11 and $12 are the ordering key and park_after, NULL for an
// unordered consumer: with a key, 0012's trigger makes the receipt its key's head or
// WAITING behind it, after RETURNING was computed (so an accepted receipt reads PENDING).
inline constexpr char kInsertText[] = R"sql(
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id,
     event_type, schema_version, payload, metadata, fingerprint, ordering_key, park_after)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9::jsonb, $10, $11, $12::integer)
ON CONFLICT (consumer, source, scope_kind, scope_id, message_id) DO NOTHING
RETURNING id, status)sql";
inline constexpr const char* kInsert = kInsertText;

// A wake-up riding on a statement that inserts (detail::AsyncNotifier::begin_ride): one
// NOTIFY on channel $13 per payload of $14, queued in the statement's transaction and
// delivered when it commits. An uncorrelated sub-select in RETURNING runs once, as the
// first row is returned, so `notified` tells the caller it ran: with no row inserted (a
// duplicate), nothing was notified.
inline constexpr char kRideColumn[] = R"sql(,
       (SELECT pg_catalog.count(pg_catalog.pg_notify($13::text, n.payload))
        FROM pg_catalog.unnest($14::text[]) AS n(payload)) AS notified
)sql";

// kInsert carrying a wake-up.
inline constexpr auto kInsertRideText = detail::concat_sql(kInsertText, kRideColumn);
inline constexpr const char* kInsertRide = kInsertRideText.data();

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

// (The multi-argument unnest(a, b, ...) is FROM-clause sugar that exists only unqualified;
// ROWS FROM of qualified one-array unnests is what it expands to.)
//
// accept_many: one statement per slice of the batch that inserts every new identity and
// returns one row per inserted identity with its id, status and identity columns
// (accept_many finds its position by identity; matching them here would cost two sorts of
// five text columns per batch). $1..$12 are one array per column (scope_kind, scope_id,
// source, consumer, message_id, event_type, schema_version, payload, metadata,
// fingerprint, ordering_key, park_after; the last two NULL for an unordered consumer, as
// in kInsert), payload and metadata as JSON arrays (their canonical text needs no escaping
// there, unlike in a jsonb[] literal), positions sorted by identity: the insert takes them
// in position order, so concurrent batches lock identities in one order and cannot
// deadlock. A plain INSERT ... SELECT, at the cost of the raw unnest insert: wrapping it in
// a CTE to look up the skipped positions in the same statement cost a third more per
// batch, even when nothing was skipped (docs/schema.md). A position the insert skipped is
// looked up by kLookupMany, a separate statement whose fresh snapshot also sees rows
// committed by a concurrent inserter after this one began.
//
// kInsertMany's text; kInsertManyRide adds a column to its RETURNING list.
inline constexpr char kInsertManyText[] = R"sql(
INSERT INTO {schema}.inbox_receipts
    (scope_kind, scope_id, source, consumer, message_id,
     event_type, schema_version, payload, metadata, fingerprint, ordering_key, park_after)
SELECT b.sk, b.si, b.src, b.c, b.m, b.et, b.sv, b.p, b.md, b.fp, b.ok, b.pa
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]),
                pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                pg_catalog.unnest($5::text[]), pg_catalog.unnest($6::text[]),
                pg_catalog.unnest($7::integer[]), pg_catalog.jsonb_array_elements($8::jsonb),
                pg_catalog.jsonb_array_elements($9::jsonb), pg_catalog.unnest($10::text[]),
                pg_catalog.unnest($11::text[]), pg_catalog.unnest($12::integer[]))
    WITH ORDINALITY AS b(sk, si, src, c, m, et, sv, p, md, fp, ok, pa, n)
ORDER BY b.n
ON CONFLICT (consumer, source, scope_kind, scope_id, message_id) DO NOTHING
RETURNING id, status, scope_kind, scope_id, source, consumer, message_id)sql";

inline constexpr const char* kInsertMany = kInsertManyText;

// kInsertMany carrying a wake-up (kRideColumn).
inline constexpr auto kInsertManyRideText = detail::concat_sql(kInsertManyText, kRideColumn);
inline constexpr const char* kInsertManyRide = kInsertManyRideText.data();

// accept_many: the stored rows of the identities the insert did nothing for, read after
// it with a fresh snapshot (READ COMMITTED). $1..$5 are arrays of scope_kind, scope_id,
// source, consumer and message_id; n is the 1-based array position.
inline constexpr const char* kLookupMany = R"sql(
SELECT b.n, r.id, r.status, r.fingerprint
FROM ROWS FROM (pg_catalog.unnest($1::text[]), pg_catalog.unnest($2::text[]),
                pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::text[]),
                pg_catalog.unnest($5::text[]))
    WITH ORDINALITY AS b(sk, si, src, c, m, n)
JOIN {schema}.inbox_receipts AS r
  ON r.consumer = b.c
 AND r.source = b.src
 AND r.scope_kind = b.sk
 AND r.scope_id = b.si
 AND r.message_id = b.m
)sql";

}  // namespace boxcar::inbox_sql
