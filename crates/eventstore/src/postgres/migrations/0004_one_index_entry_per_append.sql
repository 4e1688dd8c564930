-- Migration 4: the stream index holds one entry per append, not one per event. The first event of an
-- append (its head) carries the append's length; the others carry 0 and are found through the
-- head: an append's events have consecutive versions *and* consecutive positions. Rows that
-- say nothing (all rows stored before this version, and rows inserted by hand) default to 1:
-- each is a head of its own. Fast default, so existing rows are not rewritten.
ALTER TABLE events ADD COLUMN append_len smallint NOT NULL DEFAULT 1;
ALTER TABLE events ADD CONSTRAINT events_append_len_check CHECK (append_len >= 0);
CREATE UNIQUE INDEX events_stream_heads ON events (stream_no, version) WHERE append_len > 0;
-- The heads of appends of two or more events again: a read finds the longer appends that
-- overlap its window without visiting the heads of one-event appends a second time.
CREATE UNIQUE INDEX events_stream_multi ON events (stream_no, version) WHERE append_len > 1;
ALTER TABLE events DROP CONSTRAINT events_stream_no_version_key;

-- As in migration 3, with the append's length on its first event and 0 on the others.
CREATE OR REPLACE FUNCTION galleon_append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data json[], p_meta json[],
    OUT status int, OUT actual bigint, OUT first_version bigint, OUT first_position bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint := cardinality(p_ids);
    cur bigint;
    sno bigint;
    f_stream text;
    f_version bigint;
    f_position bigint;
    matched bigint;
    base bigint;
BEGIN
    SELECT e.stream_id, e.version, e.position INTO f_stream, f_version, f_position
      FROM events e WHERE e.event_id = p_ids[1];
    IF FOUND THEN
        SELECT count(*) INTO matched
          FROM unnest(p_ids) WITH ORDINALITY AS u(id, ord)
          JOIN events e ON e.event_id = u.id
         WHERE e.stream_id = p_stream
           AND e.version = f_version + u.ord - 1
           AND e.position = f_position + u.ord - 1;
        IF f_stream = p_stream AND matched = n THEN
            status := 1; first_version := f_version; first_position := f_position;
        ELSE
            status := 3;
        END IF;
        RETURN;
    END IF;
    LOOP
        SELECT s.version, s.stream_no INTO cur, sno
          FROM streams s WHERE s.stream_id = p_stream FOR UPDATE;
        IF FOUND THEN
            IF p_expected = -2 OR (p_expected >= 0 AND p_expected <> cur) THEN
                status := 2; actual := cur; RETURN;
            END IF;
            UPDATE streams SET version = cur + n WHERE stream_id = p_stream;
            EXIT;
        END IF;
        IF p_expected >= 0 OR p_expected = -3 THEN
            status := 2; actual := NULL; RETURN;
        END IF;
        INSERT INTO streams (stream_id, version) VALUES (p_stream, n - 1)
            ON CONFLICT DO NOTHING RETURNING streams.stream_no INTO sno;
        IF FOUND THEN
            cur := -1;
            EXIT;
        END IF;
        -- A concurrent append created the stream and committed: look again.
    END LOOP;
    first_version := cur + 1;
    base := (pg_current_xact_id()::text::bigint) << 16;
    SELECT COALESCE(max(e.position) + 1, base) INTO first_position
      FROM events e WHERE e.position >= base AND e.position < base + 65536;
    IF first_position + n > base + 65536 THEN
        RAISE EXCEPTION 'galleon_append: more than 65536 events in one transaction';
    END IF;
    INSERT INTO events
        (position, stream_id, version, event_id, event_type, data, metadata, stream_no, append_len)
    SELECT first_position + u.ord - 1, p_stream, cur + u.ord, u.id, u.t, u.d, u.m, sno,
           CASE WHEN u.ord = 1 THEN n ELSE 0 END
      FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS u(id, t, d, m, ord);
    status := 0;
END
$fn$;
