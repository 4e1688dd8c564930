-- Migration 7: an append to a stream gets a higher position than every earlier append to it,
-- also when two processes append to one stream at once.
--
-- A position is the appending transaction's id, shifted, plus the event's index in it. A
-- transaction gets its id when it first locks or writes a row, which can be before it waits
-- for a stream's row lock: two appends waiting on one stream can get the lock in the other
-- order than their ids, and the later version would then get the lower position. (One process
-- cannot do this to itself: it sends each stream's appends through one writer. Two nodes on
-- one database can.) Each stream now records its last event's position; an append that finds
-- it at or above its own transaction's positions raises `serialization_failure`, and the
-- writer runs the append again in a new transaction, whose id is newer than the committed one.
-- Existing streams read NULL, which no comparison fails.
ALTER TABLE streams ADD COLUMN last_position bigint;

-- As in migration 4, with the check, and the stream's row written once, after its positions
-- are known.
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
    lp bigint;
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
        SELECT s.version, s.stream_no, s.last_position INTO cur, sno, lp
          FROM streams s WHERE s.stream_id = p_stream FOR UPDATE;
        IF FOUND THEN
            IF p_expected = -2 OR (p_expected >= 0 AND p_expected <> cur) THEN
                status := 2; actual := cur; RETURN;
            END IF;
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
    IF lp >= base THEN
        RAISE EXCEPTION 'galleon_append: a newer transaction appended to the stream first'
            USING ERRCODE = 'serialization_failure';
    END IF;
    UPDATE streams SET version = cur + n, last_position = first_position + n - 1
     WHERE stream_no = sno;
    INSERT INTO events
        (position, stream_id, version, event_id, event_type, data, metadata, stream_no, append_len)
    SELECT first_position + u.ord - 1, p_stream, cur + u.ord, u.id, u.t, u.d, u.m, sno,
           CASE WHEN u.ord = 1 THEN n ELSE 0 END
      FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS u(id, t, d, m, ord);
    status := 0;
END
$fn$;

-- As in migration 3, with the check, and each touched stream's last position stored.
CREATE OR REPLACE FUNCTION galleon_append_batch(
    p_streams text[], p_expected bigint[], p_counts int[], p_first_ids uuid[])
RETURNS TABLE (status int, actual bigint, first_version bigint, first_position bigint,
               stream_no bigint)
LANGUAGE plpgsql
SET enable_seqscan = off
AS $fn$
DECLARE
    k int := cardinality(p_streams);
    st int[] := array_fill(NULL::int, ARRAY[k]);
    ac bigint[] := array_fill(NULL::bigint, ARRAY[k]);
    fv bigint[] := array_fill(NULL::bigint, ARRAY[k]);
    fp bigint[] := array_fill(NULL::bigint, ARRAY[k]);
    sn bigint[] := array_fill(NULL::bigint, ARRAY[k]);
    stored bool[];
    ords int[];
    vers bigint[];
    nos bigint[];
    lasts bigint[];
    upd_names text[] := '{}';
    upd_versions bigint[] := '{}';
    upd_lasts bigint[] := '{}';
    new_names text[] := '{}';
    new_versions bigint[] := '{}';
    new_nos bigint[] := '{}';
    new_lasts bigint[] := '{}';
    x_last bigint;
    i int;
    x_exp bigint;
    x_n bigint;
    x_cur bigint;
    x_no bigint;
    existed bool;
    changed bool := false;
    x_name text;
    total bigint := 0;
    base bigint;
    first bigint;
    inserted bigint;
BEGIN
    IF cardinality(p_expected) <> k OR cardinality(p_counts) <> k
       OR cardinality(p_first_ids) <> k THEN
        RAISE EXCEPTION 'galleon_append_batch: arrays of different lengths';
    END IF;
    IF k = 0 THEN
        RETURN;
    END IF;
    stored := ARRAY(SELECT ev.event_id IS NOT NULL
                      FROM unnest(p_first_ids) WITH ORDINALITY AS f(id, o)
                      LEFT JOIN events ev ON ev.event_id = f.id
                     ORDER BY f.o);
    WITH locked AS (
        SELECT s.stream_id, s.version, s.stream_no, s.last_position FROM streams s
         WHERE s.stream_id = ANY(p_streams) ORDER BY s.stream_id FOR UPDATE)
    SELECT array_agg(u.o ORDER BY u.name, u.o), array_agg(l.version ORDER BY u.name, u.o),
           array_agg(l.stream_no ORDER BY u.name, u.o), array_agg(l.last_position)
      INTO ords, vers, nos, lasts
      FROM unnest(p_streams) WITH ORDINALITY AS u(name, o)
      LEFT JOIN locked l ON l.stream_id = u.name;
    FOR j IN 1..k LOOP
        i := ords[j];
        IF j = 1 OR p_streams[i] <> x_name THEN
            IF changed THEN
                IF existed THEN
                    upd_names := upd_names || x_name; upd_versions := upd_versions || x_cur;
                    upd_lasts := upd_lasts || x_last;
                ELSE
                    new_names := new_names || x_name; new_versions := new_versions || x_cur;
                    new_nos := new_nos || x_no; new_lasts := new_lasts || x_last;
                END IF;
            END IF;
            x_name := p_streams[i];
            x_cur := vers[j];
            x_no := nos[j];
            existed := x_cur IS NOT NULL;
            changed := false;
        END IF;
        IF stored[i] THEN
            st[i] := 4;
            CONTINUE;
        END IF;
        x_exp := p_expected[i];
        x_n := p_counts[i];
        IF x_cur IS NOT NULL THEN
            IF x_exp = -2 OR (x_exp >= 0 AND x_exp <> x_cur) THEN
                st[i] := 2; ac[i] := x_cur;
                CONTINUE;
            END IF;
        ELSIF x_exp >= 0 OR x_exp = -3 THEN
            st[i] := 2;
            CONTINUE;
        END IF;
        IF x_no IS NULL THEN
            x_no := nextval('streams_stream_no_seq');
        END IF;
        st[i] := 0;
        fv[i] := COALESCE(x_cur, -1) + 1;
        fp[i] := total;
        sn[i] := x_no;
        total := total + x_n;
        x_last := total - 1;
        x_cur := COALESCE(x_cur, -1) + x_n;
        changed := true;
    END LOOP;
    IF changed THEN
        IF existed THEN
            upd_names := upd_names || x_name; upd_versions := upd_versions || x_cur;
            upd_lasts := upd_lasts || x_last;
        ELSE
            new_names := new_names || x_name; new_versions := new_versions || x_cur;
            new_nos := new_nos || x_no; new_lasts := new_lasts || x_last;
        END IF;
    END IF;
    IF total > 0 THEN
        base := (pg_current_xact_id()::text::bigint) << 16;
        SELECT COALESCE(max(ev.position) + 1, base) INTO first
          FROM events ev WHERE ev.position >= base AND ev.position < base + 65536;
        IF first + total > base + 65536 THEN
            RAISE EXCEPTION 'galleon_append_batch: more than 65536 events in one transaction';
        END IF;
        IF (SELECT max(l) FROM unnest(lasts) AS l) >= base THEN
            RAISE EXCEPTION 'galleon_append_batch: a newer transaction appended to a stream first'
                USING ERRCODE = 'serialization_failure';
        END IF;
        FOR i IN 1..k LOOP
            IF st[i] = 0 THEN
                fp[i] := fp[i] + first;
            END IF;
        END LOOP;
        UPDATE streams s SET version = v.version, last_position = v.last + first
          FROM unnest(upd_names, upd_versions, upd_lasts) AS v(name, version, last)
         WHERE s.stream_id = v.name;
        INSERT INTO streams (stream_id, version, stream_no, last_position)
        SELECT v.name, v.version, v.no, v.last + first
          FROM unnest(new_names, new_versions, new_nos, new_lasts) AS v(name, version, no, last)
         ORDER BY v.name
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS inserted = ROW_COUNT;
        IF inserted <> cardinality(new_names) THEN
            RAISE EXCEPTION 'galleon_append_batch: a stream was created concurrently'
                USING ERRCODE = 'serialization_failure';
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM unnest(st, ac, fv, fp, sn);
END
$fn$;
