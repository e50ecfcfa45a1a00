-- Operator recovery, retention and cheap backlog metrics. See docs/schema.md and
-- docs/operations.md.
--
-- boxcar:previous-checksum df049d5edddc808fd65979d0ab8f8af4445c6c22a4431fd095746efcaf6ebd47
-- Until online upgrades, this file also built four indexes inside its transaction, holding
-- ACCESS EXCLUSIVE on both hot tables for the whole build. They moved to 0005-0008, built
-- CONCURRENTLY; schemas that applied the old text (the checksum above) already have them,
-- and 0005-0008 find them there.

-- Who replayed or discarded a DEAD record, when, and how often it was replayed.
ALTER TABLE inbox_receipts
    ADD COLUMN replay_count integer NOT NULL DEFAULT 0,
    ADD COLUMN last_replayed_at timestamptz,
    ADD COLUMN last_replayed_by text,
    ADD COLUMN discarded_at timestamptz,
    ADD COLUMN discarded_by text;
ALTER TABLE outbox_events
    ADD COLUMN replay_count integer NOT NULL DEFAULT 0,
    ADD COLUMN last_replayed_at timestamptz,
    ADD COLUMN last_replayed_by text,
    ADD COLUMN discarded_at timestamptz,
    ADD COLUMN discarded_by text;
