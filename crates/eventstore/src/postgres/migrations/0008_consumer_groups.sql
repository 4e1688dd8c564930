-- Migration 8: consumer groups. A group's settings live on its subscription row (`NULL` for a
-- plain subscription); each partition has its own checkpoint and at most one owner; each member
-- has a row whose `expires_at` (microseconds since the Unix epoch, by the server's clock) its
-- heartbeats push forward. Rows go with their subscription.
ALTER TABLE subscriptions ADD COLUMN partitions integer;
ALTER TABLE subscriptions ADD COLUMN member_timeout_ms bigint;
CREATE TABLE subscription_partitions (
    name       text    NOT NULL REFERENCES subscriptions (name) ON DELETE CASCADE,
    partition  integer NOT NULL,
    checkpoint bigint  NOT NULL,
    owner      text,
    PRIMARY KEY (name, partition)
);
CREATE TABLE subscription_members (
    name       text   NOT NULL REFERENCES subscriptions (name) ON DELETE CASCADE,
    member     text   NOT NULL,
    expires_at bigint NOT NULL,
    PRIMARY KEY (name, member)
);
