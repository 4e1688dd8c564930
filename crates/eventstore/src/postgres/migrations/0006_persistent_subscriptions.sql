-- Migration 6: persistent subscriptions and their checkpoints. `checkpoint` is where delivery
-- continues: one past the last acknowledged position (the start position until the first ack);
-- acks only move it forward (`GREATEST`).
CREATE TABLE subscriptions (
    name        text        PRIMARY KEY,
    category    text,
    event_types text[]      NOT NULL DEFAULT '{}',
    checkpoint  bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
