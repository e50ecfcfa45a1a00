-- Outbox events: one row per emitted event, written in the emitter's transaction and
-- delivered to Kafka by publishers. See docs/schema.md.
CREATE TABLE outbox_events (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id          uuid        NOT NULL,
    event_type        text        NOT NULL,
    schema_version    integer     NOT NULL,
    topic             text        NOT NULL,
    message_key       text        NOT NULL,
    tenant_scope      text        NOT NULL,
    tenant_id         text        NOT NULL DEFAULT '',
    causation_id      text        NOT NULL DEFAULT '',
    correlation_id    text        NOT NULL DEFAULT '',
    traceparent       text        NOT NULL DEFAULT '',
    headers           jsonb       NOT NULL DEFAULT '{}'::jsonb,
    -- Canonical JSON (RFC 8785): the exact bytes published, so a consumer's fingerprint
    -- of the record matches the emitter's.
    payload           text        NOT NULL,
    status            text        NOT NULL DEFAULT 'PENDING',
    attempts          integer     NOT NULL DEFAULT 0,
    available_at      timestamptz NOT NULL DEFAULT now(),
    claim_token       uuid,
    lease_expires_at  timestamptz,
    last_error        text,
    dead_reason       text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    published_at      timestamptz,

    CONSTRAINT outbox_events_event_id UNIQUE (event_id),
    CONSTRAINT outbox_events_tenant CHECK (
        tenant_scope IN ('tenant', 'global') AND (tenant_scope = 'global') = (tenant_id = '')),
    CONSTRAINT outbox_events_names CHECK (
        octet_length(event_type) BETWEEN 1 AND 512
        AND octet_length(topic) BETWEEN 1 AND 249
        AND schema_version >= 1),
    CONSTRAINT outbox_events_status CHECK (
        status IN ('PENDING', 'PUBLISHING', 'RETRYABLE', 'PUBLISHED', 'DEAD')),
    CONSTRAINT outbox_events_claim CHECK (
        (status = 'PUBLISHING') = (claim_token IS NOT NULL)
        AND (claim_token IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT outbox_events_published CHECK ((status = 'PUBLISHED') = (published_at IS NOT NULL)),
    CONSTRAINT outbox_events_dead CHECK ((status = 'DEAD') = (dead_reason IS NOT NULL)),
    CONSTRAINT outbox_events_attempts CHECK (attempts >= 0)
);

-- Next due events, oldest first: the publisher's claim is an index scan in emit order.
CREATE INDEX outbox_events_due
    ON outbox_events (available_at, id)
    WHERE status IN ('PENDING', 'RETRYABLE');

-- Claims whose publisher died: lease recovery without scanning published rows.
CREATE INDEX outbox_events_leases
    ON outbox_events (lease_expires_at)
    WHERE status = 'PUBLISHING';

ALTER TABLE outbox_events SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02
);
