-- Migration 1: events, streams and the append function.
CREATE TABLE events (
    position   bigint PRIMARY KEY,
    stream_id  text   NOT NULL,
    version    bigint NOT NULL,
    event_id   uuid   NOT NULL UNIQUE,
    event_type text   NOT NULL,
    data       json   NOT NULL,
    metadata   json   NOT NULL,
    UNIQUE (stream_id, version)
);
CREATE TABLE streams (
    stream_id text   PRIMARY KEY,
    version   bigint NOT NULL
);
-- status: 0 appended, 1 idempotent retry (nothing stored), 2 wrong expected version
-- (actual = current last version, NULL for no stream), 3 an event id is stored elsewhere.
-- p_expected: -1 any, -2 no_stream, -3 stream_exists, >= 0 exact.
CREATE FUNCTION galleon_append(
    p_stream text, p_expected bigint,
    p_ids uuid[], p_types text[], p_data json[], p_meta json[],
    OUT status int, OUT actual bigint, OUT first_version bigint, OUT first_position bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    n bigint := cardinality(p_ids);
    cur bigint;
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
        SELECT s.version INTO cur FROM streams s WHERE s.stream_id = p_stream FOR UPDATE;
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
        INSERT INTO streams (stream_id, version) VALUES (p_stream, n - 1) ON CONFLICT DO NOTHING;
        IF FOUND THEN
            cur := -1;
            EXIT;
        END IF;
        -- A concurrent append created the stream and committed: look again.
    END LOOP;
    first_version := cur + 1;
    -- Positions of this transaction: its id << 16, plus an index. Usually the first append of
    -- the transaction; if an earlier one in the same transaction took some, continue after them.
    base := (pg_current_xact_id()::text::bigint) << 16;
    SELECT COALESCE(max(e.position) + 1, base) INTO first_position
      FROM events e WHERE e.position >= base AND e.position < base + 65536;
    IF first_position + n > base + 65536 THEN
        RAISE EXCEPTION 'galleon_append: more than 65536 events in one transaction';
    END IF;
    INSERT INTO events (position, stream_id, version, event_id, event_type, data, metadata)
    SELECT first_position + u.ord - 1, p_stream, cur + u.ord, u.id, u.t, u.d, u.m
      FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS u(id, t, d, m, ord);
    status := 0;
END
$fn$;
