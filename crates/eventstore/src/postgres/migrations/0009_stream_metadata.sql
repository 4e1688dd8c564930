-- Migration 9: stream metadata (`crate::stream_meta`): per stream, at most `max_count` of its
-- latest events and those younger than `max_age_ms` are read; reads start at `truncate_before`;
-- `deleted` (a soft delete) makes a stream with nothing at or after `truncate_before` read as
-- not found. Applied on stream reads only; the events stay in `$all`.
CREATE TABLE stream_meta (
    stream_id       text    PRIMARY KEY,
    max_count       bigint,
    max_age_ms      bigint,
    truncate_before bigint,
    deleted         boolean NOT NULL DEFAULT false
);
