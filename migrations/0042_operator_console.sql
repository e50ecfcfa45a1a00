-- boxcar:compatible-with 41
-- The operator console (docs/console.md): who released an ordering key, a record of every
-- operator action, and payload-free views for the console's read-only role. Older builds
-- read none of this and write nothing here (a key they release records no actor):
-- compatible with 41.

-- Who released the key a DEAD head blocked (`boxcar dead unblock`, the console's unblock),
-- beside key_released_at. Nullable without a default: no rewrite, ACCESS EXCLUSIVE for an
-- instant only.
ALTER TABLE inbox_receipts ADD COLUMN key_released_by text;

-- One row per operator action taken through the console: what it did, to what, how many
-- rows it changed, who and when. The rows themselves keep their own audit columns
-- (last_replayed_by, discarded_by, key_released_by); this is the list the console shows.
-- target: the group key, the receipt or event id, or the scoped ordering key.
CREATE TABLE operator_actions (
    id         bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    acted_at   timestamptz NOT NULL DEFAULT pg_catalog.now(),
    actor      text        NOT NULL,
    action     text        NOT NULL,
    kind       text        NOT NULL,
    target     text        NOT NULL,
    row_count  integer     NOT NULL,
    CONSTRAINT operator_actions_action CHECK (action IN ('retry', 'discard', 'unblock')),
    CONSTRAINT operator_actions_kind CHECK (kind IN ('inbox', 'outbox')),
    CONSTRAINT operator_actions_actor CHECK (actor <> '')
);

-- The console's read-only role sees DEAD records through these views only: identity,
-- attempts, errors and the audit columns, never a payload, metadata or headers (other
-- tenants' data). An admin's request for a payload goes through the operator role. Simple
-- views over one table each, so the planner keeps using the DEAD indexes.
CREATE VIEW console_inbox_dead AS
SELECT r.id,
       r.scope_kind,
       r.scope_id,
       r.source,
       r.consumer,
       r.message_id,
       r.event_type,
       r.schema_version,
       r.attempts,
       r.dead_reason,
       r.last_error_type,
       r.last_error,
       failure_fingerprint(r.last_error_type, r.last_error) AS failure,
       pg_catalog.left(pg_catalog.md5(failure_fingerprint(r.last_error_type, r.last_error)), 12)
           AS failure_group,
       r.ordering_key,
       r.created_at,
       r.updated_at,
       r.replay_count,
       r.last_replayed_at,
       r.last_replayed_by,
       r.discarded_at,
       r.discarded_by,
       r.key_released_at,
       r.key_released_by
FROM inbox_receipts AS r
WHERE r.status = 'DEAD';

CREATE VIEW console_outbox_dead AS
SELECT e.id,
       e.tenant_scope,
       e.tenant_id,
       e.event_id,
       e.topic,
       e.message_key,
       e.event_type,
       e.schema_version,
       e.attempts,
       e.dead_reason,
       e.last_error,
       failure_fingerprint(e.dead_reason, e.last_error) AS failure,
       pg_catalog.left(pg_catalog.md5(failure_fingerprint(e.dead_reason, e.last_error)), 12)
           AS failure_group,
       e.created_at,
       e.updated_at,
       e.replay_count,
       e.last_replayed_at,
       e.last_replayed_by,
       e.discarded_at,
       e.discarded_by
FROM outbox_events AS e
WHERE e.status = 'DEAD';
