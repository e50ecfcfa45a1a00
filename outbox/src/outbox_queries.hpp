// The emitter's SQL. `{schema}` is replaced once at construction; values are $n.
// These statements run with the application's search_path: built-ins are called as
// pg_catalog.<name> and operands have the exact types of a pg_catalog operator (docs/schema.md,
// "search_path"; tests/host/builtin_qualification_test.cpp checks the calls).
#pragma once

namespace boxcar::outbox_sql {

// `ordered`: the trigger of 0013_outbox_key_order.sql gives an ordered event its key_seq and
// makes it WAITING behind an unfinished event of its key (docs/schema.md, "Key order").
inline constexpr const char* kInsert = R"sql(
INSERT INTO {schema}.outbox_events
    (event_id, event_type, schema_version, topic, message_key, tenant_scope, tenant_id,
     causation_id, correlation_id, traceparent, headers, payload, ordered)
VALUES ($1::uuid, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::jsonb, $12, $13::boolean)
RETURNING id
)sql";

}  // namespace boxcar::outbox_sql
