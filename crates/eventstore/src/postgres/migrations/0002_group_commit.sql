-- Migration 2: group commit. `galleon_append_batch` checks and reserves a batch of appends in one call
-- (one result row per append, in input order); the caller then COPYs the events of the
-- accepted ones (status 0) in the same transaction and commits once for all of them.
-- status: 0 accepted (first_version, first_position reserved; the caller inserts the events),
-- 2 wrong expected version (actual as in galleon_append), 4 the first event id is stored already:
-- a retry or a duplicate, which the caller answers with galleon_append after this transaction.
-- Nothing is written for appends of status 2 and 4. A stream that a concurrent transaction
-- creates while this call runs raises serialization_failure (the caller falls back to
-- galleon_append per append).
CREATE FUNCTION galleon_append_batch(
    p_streams text[], p_expected bigint[], p_counts int[], p_first_ids uuid[])
RETURNS TABLE (status int, actual bigint, first_version bigint, first_position bigint)
LANGUAGE plpgsql
-- Every lookup here is by key. PL/pgSQL keeps the plans it made for the first calls, when the
-- tables may have been empty and a sequential scan (or a hash join over one) looked cheapest;
-- 10 000s of events later such a plan scans the whole table per batch. Index plans only.
SET enable_seqscan = off
AS $fn$
DECLARE
    k int := cardinality(p_streams);
    st int[] := array_fill(NULL::int, ARRAY[k]);
    ac bigint[] := array_fill(NULL::bigint, ARRAY[k]);
    fv bigint[] := array_fill(NULL::bigint, ARRAY[k]);
    fp bigint[] := array_fill(NULL::bigint, ARRAY[k]);
    stored bool[];
    ords int[];
    vers bigint[];
    upd_names text[] := '{}';
    upd_versions bigint[] := '{}';
    new_names text[] := '{}';
    new_versions bigint[] := '{}';
    i int;
    x_exp bigint;
    x_n bigint;
    x_cur bigint;
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
    -- Lock the existing streams in one global order (no deadlock between batches), then walk
    -- the appends grouped by stream, in input order within a stream.
    WITH locked AS (
        SELECT s.stream_id, s.version FROM streams s
         WHERE s.stream_id = ANY(p_streams) ORDER BY s.stream_id FOR UPDATE)
    SELECT array_agg(u.o ORDER BY u.name, u.o), array_agg(l.version ORDER BY u.name, u.o)
      INTO ords, vers
      FROM unnest(p_streams) WITH ORDINALITY AS u(name, o)
      LEFT JOIN locked l ON l.stream_id = u.name;
    FOR j IN 1..k LOOP
        i := ords[j];
        IF j = 1 OR p_streams[i] <> x_name THEN
            IF changed THEN
                IF existed THEN
                    upd_names := upd_names || x_name; upd_versions := upd_versions || x_cur;
                ELSE
                    new_names := new_names || x_name; new_versions := new_versions || x_cur;
                END IF;
            END IF;
            x_name := p_streams[i];
            x_cur := vers[j];
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
        st[i] := 0;
        fv[i] := COALESCE(x_cur, -1) + 1;
        fp[i] := total;
        total := total + x_n;
        x_cur := COALESCE(x_cur, -1) + x_n;
        changed := true;
    END LOOP;
    IF changed THEN
        IF existed THEN
            upd_names := upd_names || x_name; upd_versions := upd_versions || x_cur;
        ELSE
            new_names := new_names || x_name; new_versions := new_versions || x_cur;
        END IF;
    END IF;
    IF total > 0 THEN
        -- Positions as in galleon_append: this transaction's id << 16, plus an index.
        base := (pg_current_xact_id()::text::bigint) << 16;
        SELECT COALESCE(max(ev.position) + 1, base) INTO first
          FROM events ev WHERE ev.position >= base AND ev.position < base + 65536;
        IF first + total > base + 65536 THEN
            RAISE EXCEPTION 'galleon_append_batch: more than 65536 events in one transaction';
        END IF;
        FOR i IN 1..k LOOP
            IF st[i] = 0 THEN
                fp[i] := fp[i] + first;
            END IF;
        END LOOP;
        UPDATE streams s SET version = v.version
          FROM unnest(upd_names, upd_versions) AS v(name, version)
         WHERE s.stream_id = v.name;
        INSERT INTO streams (stream_id, version)
        SELECT v.name, v.version FROM unnest(new_names, new_versions) AS v(name, version)
         ORDER BY v.name
        ON CONFLICT DO NOTHING;
        GET DIAGNOSTICS inserted = ROW_COUNT;
        IF inserted <> cardinality(new_names) THEN
            RAISE EXCEPTION 'galleon_append_batch: a stream was created concurrently'
                USING ERRCODE = 'serialization_failure';
        END IF;
    END IF;
    RETURN QUERY SELECT * FROM unnest(st, ac, fv, fp);
END
$fn$;
