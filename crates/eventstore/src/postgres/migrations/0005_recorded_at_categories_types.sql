-- Migration 5: when each event was recorded, and indexes for reads and subscriptions by category
-- and by event type.
--
-- `recorded_at` is the append transaction's `now()` (COPY and `galleon_append` leave the column
-- to its default, so neither function changes). A non-volatile default is stored in the catalog
-- (PostgreSQL 11+): existing rows are not rewritten and read back the time of this upgrade.
ALTER TABLE events ADD COLUMN recorded_at timestamptz NOT NULL DEFAULT now();
-- message-db's category: the stream id up to its first `-` (all of it when it has none). An
-- expression index rather than a column: no change to the COPY format or the append functions.
-- Reads name the same expression, `split_part(stream_id, '-', 1)`.
CREATE INDEX events_category ON events (split_part(stream_id, '-', 1), position);
CREATE INDEX events_type ON events (event_type, position);
