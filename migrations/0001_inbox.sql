-- Inbox receipts: one row per retained message identity. Runs with search_path set to
-- the configured schema; see docs/schema.md for why each column and index exists.
CREATE TABLE inbox_receipts (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scope_kind        text        NOT NULL,
    scope_id          text        NOT NULL DEFAULT '',
    source            text        NOT NULL,
    consumer          text        NOT NULL,
    message_id        text        NOT NULL,
    event_type        text        NOT NULL,
    schema_version    integer     NOT NULL,
    payload           jsonb       NOT NULL,
    metadata          jsonb       NOT NULL DEFAULT '{}'::jsonb,
    fingerprint       text        NOT NULL,
    status            text        NOT NULL DEFAULT 'PENDING',
    attempts          integer     NOT NULL DEFAULT 0,
    finished_attempts integer     NOT NULL DEFAULT 0,
    available_at      timestamptz NOT NULL DEFAULT now(),
    claim_token       uuid,
    lease_expires_at  timestamptz,
    last_error_type   text,
    last_error        text,
    dead_reason       text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    completed_at      timestamptz,

    CONSTRAINT inbox_receipts_scope_kind CHECK (scope_kind IN ('tenant', 'global')),
    CONSTRAINT inbox_receipts_scope_id CHECK ((scope_kind = 'global') = (scope_id = '')),
    CONSTRAINT inbox_receipts_identity_lengths CHECK (
        octet_length(source) BETWEEN 1 AND 512
        AND octet_length(consumer) BETWEEN 1 AND 512
        AND octet_length(message_id) BETWEEN 1 AND 512
        AND octet_length(scope_id) <= 512),
    CONSTRAINT inbox_receipts_event_type CHECK (octet_length(event_type) BETWEEN 1 AND 512),
    CONSTRAINT inbox_receipts_schema_version CHECK (schema_version >= 1),
    CONSTRAINT inbox_receipts_metadata_object CHECK (jsonb_typeof(metadata) = 'object'),
    CONSTRAINT inbox_receipts_fingerprint CHECK (fingerprint ~ '^[0-9a-f]{64}$'),
    CONSTRAINT inbox_receipts_status CHECK (
        status IN ('PENDING', 'PROCESSING', 'RETRYABLE', 'COMPLETED', 'DEAD')),
    CONSTRAINT inbox_receipts_attempts CHECK (
        attempts >= 0 AND finished_attempts >= 0 AND finished_attempts <= attempts),
    -- A claim exists exactly while a row is PROCESSING, and always has a lease.
    CONSTRAINT inbox_receipts_claim CHECK (
        (status = 'PROCESSING') = (claim_token IS NOT NULL)
        AND (claim_token IS NULL) = (lease_expires_at IS NULL)),
    CONSTRAINT inbox_receipts_completed CHECK ((status = 'COMPLETED') = (completed_at IS NOT NULL)),
    CONSTRAINT inbox_receipts_dead CHECK ((status = 'DEAD') = (dead_reason IS NOT NULL))
);

-- The retained identity: deduplication and conflict detection.
CREATE UNIQUE INDEX inbox_receipts_identity
    ON inbox_receipts (consumer, source, scope_kind, scope_id, message_id);

-- Next claimable rows for a consumer, oldest due first: the claim query's index scan.
CREATE INDEX inbox_receipts_claimable
    ON inbox_receipts (consumer, available_at)
    WHERE status IN ('PENDING', 'RETRYABLE');

-- Expired leases for a consumer: lease recovery without scanning finished rows.
CREATE INDEX inbox_receipts_leases
    ON inbox_receipts (consumer, lease_expires_at)
    WHERE status = 'PROCESSING';

-- A queue table churns: vacuum it early so dead tuples do not pile up between runs.
ALTER TABLE inbox_receipts SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.02
);
