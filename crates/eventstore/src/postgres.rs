//! The PostgreSQL backend: a deadpool of tokio-postgres connections, appends group-committed by
//! writer tasks (one server-side check per batch, one COPY of its events, one commit), `$all`
//! read below the oldest running transaction.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::{SinkExt, StreamExt};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};
use tokio_postgres::{AsyncMessage, NoTls};

use crate::error::{Error, Result};
use crate::types::{AppendResult, Direction, EventData, ExpectedVersion, Json, RecordedEvent};

/// Bits of a position that number the events of one transaction; the bits above hold the
/// transaction id. 16 bits allow 65 536 events per append ([`crate::MAX_APPEND_EVENTS`] is
/// below that) and leave 47 bits of transaction ids: 1.4e14 transactions, 44 years at 100 000
/// appends per second.
pub(crate) const POSITION_SHIFT: u32 = 16;

const _: () = assert!(crate::types::MAX_APPEND_EVENTS < (1 << POSITION_SHIFT));
// An append's length is stored with its first event as a `smallint` (schema version 4).
const _: () = assert!(crate::types::MAX_APPEND_EVENTS <= i16::MAX as usize);

/// Connections in the pool unless the caller says otherwise. Tuning runs of the bench
/// (`GALLEON_BENCH_PG_POOL=4/8/16/32`, `append 100 events, 100 writers`) on the loaded 2-core VM
/// gave 161 / 191-275 / 201-208 / 221 ms: no measurable gain past 4, within noise up to 16. 16
/// leaves room for machines with more cores while staying far below PostgreSQL's default
/// `max_connections` of 100, which other clients share.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// Attempts of a read when the pooled connection turns out broken: the first, then one on a
/// fresh connection. More would only wait longer on a server that is really down.
const READ_ATTEMPTS: u32 = 2;

/// The channel appends NOTIFY on after commit and subscribers LISTEN on.
const NOTIFY_CHANNEL: &str = "galleon_events";

/// Shortest time between two NOTIFYs of one store: the first append after a quiet spell is
/// announced at once, later ones are folded into one NOTIFY per interval. Each NOTIFY is a small
/// transaction on the server; under a stream of appends (bench `append, 1 writer`: one append
/// per ~4 ms) one NOTIFY per append cost measurable server CPU. Other processes' subscribers
/// learn of an append at most this much later (local subscribers are woken directly).
const NOTIFY_MIN_INTERVAL: Duration = Duration::from_millis(10);

/// While group-commit batches are being written, how often the store wakes PostgreSQL's WAL
/// writer ([`nudge_wal_writer`]). A batch writes megabytes of WAL that nothing flushes until its
/// commit (the WAL writer sleeps `wal_writer_delay`, 200 ms, unless an asynchronous commit wakes
/// it), so the commits that end a burst each waited for one large `fdatasync`. Woken every 2 ms,
/// the WAL writer flushes in the background while the batches are still being copied (it
/// flushes once `wal_writer_flush_after`, 1 MB, has been written), and a commit waits for the
/// rest only. Bench, 100 concurrent appends of 100 events: 44.2-44.7 ms vs 46.9-48.2 ms without
/// (3 interleaved pairs, DESIGN-NOTES.md).
const WAL_NUDGE_INTERVAL: Duration = Duration::from_millis(2);

/// First wait before reconnecting the LISTEN connection; doubled per failure up to
/// [`RECONNECT_MAX`]. Guesses: quick recovery from a restart, no hammering of a down server.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
/// Longest wait between reconnection attempts of the LISTEN connection.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// Key of the advisory lock that serialises concurrent migrations (any fixed number works;
/// this one is "galleon" in ASCII, truncated to 8 bytes' worth of hex digits).
const MIGRATION_LOCK_KEY: i64 = 0x67616c6c656f6e;

/// Schema migrations, applied in order; the schema version is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: events, streams and the append function.
    r#"
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
"#,
    // 2: group commit. `galleon_append_batch` checks and reserves a batch of appends in one call
    // (one result row per append, in input order); the caller then COPYs the events of the
    // accepted ones (status 0) in the same transaction and commits once for all of them.
    r#"
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
"#,
    // 3: a bigint stream number in the events' unique index instead of the stream's name (as the
    // seed's Elixir store does): 8-byte keys compared as integers, not ~40-byte text compared
    // under the database's collation. Events keep their stream's name (unindexed) so `$all`
    // reads need no join. Existing schemas are upgraded in place: every stream gets a number,
    // every event its stream's.
    r#"
CREATE SEQUENCE streams_stream_no_seq;
ALTER TABLE streams ADD COLUMN stream_no bigint NOT NULL DEFAULT nextval('streams_stream_no_seq');
ALTER SEQUENCE streams_stream_no_seq OWNED BY streams.stream_no;
ALTER TABLE events ADD COLUMN stream_no bigint;
UPDATE events e SET stream_no = s.stream_no FROM streams s WHERE s.stream_id = e.stream_id;
ALTER TABLE events ALTER COLUMN stream_no SET NOT NULL;
ALTER TABLE events ADD CONSTRAINT events_stream_no_version_key UNIQUE (stream_no, version);
ALTER TABLE events DROP CONSTRAINT events_stream_id_version_key;

-- As in migration 1, plus the stream number: found with the stream's row (locked) or assigned
-- when the row is created, and stored with every event.
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
        (position, stream_id, version, event_id, event_type, data, metadata, stream_no)
    SELECT first_position + u.ord - 1, p_stream, cur + u.ord, u.id, u.t, u.d, u.m, sno
      FROM unnest(p_ids, p_types, p_data, p_meta) WITH ORDINALITY AS u(id, t, d, m, ord);
    status := 0;
END
$fn$;

-- As in migration 2, plus each accepted append's stream number (the caller COPYs it with the
-- events): an existing stream's from its locked row, a new stream's drawn from the sequence
-- when its first append is accepted.
DROP FUNCTION galleon_append_batch(text[], bigint[], int[], uuid[]);
CREATE FUNCTION galleon_append_batch(
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
    upd_names text[] := '{}';
    upd_versions bigint[] := '{}';
    new_names text[] := '{}';
    new_versions bigint[] := '{}';
    new_nos bigint[] := '{}';
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
        SELECT s.stream_id, s.version, s.stream_no FROM streams s
         WHERE s.stream_id = ANY(p_streams) ORDER BY s.stream_id FOR UPDATE)
    SELECT array_agg(u.o ORDER BY u.name, u.o), array_agg(l.version ORDER BY u.name, u.o),
           array_agg(l.stream_no ORDER BY u.name, u.o)
      INTO ords, vers, nos
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
                    new_nos := new_nos || x_no;
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
        x_cur := COALESCE(x_cur, -1) + x_n;
        changed := true;
    END LOOP;
    IF changed THEN
        IF existed THEN
            upd_names := upd_names || x_name; upd_versions := upd_versions || x_cur;
        ELSE
            new_names := new_names || x_name; new_versions := new_versions || x_cur;
            new_nos := new_nos || x_no;
        END IF;
    END IF;
    IF total > 0 THEN
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
        INSERT INTO streams (stream_id, version, stream_no)
        SELECT v.name, v.version, v.no
          FROM unnest(new_names, new_versions, new_nos) AS v(name, version, no)
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
"#,
    // 4: the stream index holds one entry per append, not one per event. The first event of an
    // append (its head) carries the append's length; the others carry 0 and are found through the
    // head: an append's events have consecutive versions *and* consecutive positions. Rows that
    // say nothing (all rows stored before this version, and rows inserted by hand) default to 1:
    // each is a head of its own. Fast default, so existing rows are not rewritten.
    r#"
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
"#,
];

const SQL_APPEND: &str = "SELECT status, actual, first_version, first_position \
     FROM galleon_append($1, $2, $3, $4, $5, $6)";

const SQL_APPEND_BATCH: &str = "SELECT status, actual, first_version, first_position, stream_no \
     FROM galleon_append_batch($1, $2, $3, $4)";

/// The events of a batch's accepted appends, in PostgreSQL's binary COPY format. COPY inserts
/// them in bulk (one WAL record per heap page, no per-row executor work), measurably cheaper per
/// event than `INSERT ... SELECT FROM unnest(...)`.
const SQL_COPY_EVENTS: &str = "COPY events (position, stream_no, stream_id, version, event_id, event_type, data, metadata, append_len) \
     FROM STDIN (FORMAT binary)";

/// Writer tasks, each with its own queue. An append goes to the writer that has appends of its
/// stream queued or running, if any (so appends to one stream stay in order and one process's
/// batches never wait on each other's stream locks), else to the writer with the fewest appends
/// queued or running ([`Router`]): a burst of appends to many streams is split evenly (hashing the
/// stream name, as before, gave the 4 writers of the bench's 100 appends anywhere from ~15 to
/// ~31 appends each, and the busiest one set the wall time). Each writer runs one transaction at
/// a time (a direct append or a batch), so this is also the number of server backends appending
/// at once. A batch keeps one server core busy copying rows, and fewer writers make bigger
/// batches (the fixed cost of a batch, ~1 ms of server CPU, spreads over more events): one
/// writer per core, at least 2, at most [`MAX_WRITERS`]. On the 2-core development VM, 2 writers
/// against 4: 100 concurrent appends 37.4-40.0 ms vs 39.3-42.2 ms (5 interleaved bench pairs),
/// 10 concurrent appends 7.0-7.6 ms vs 6.4-7.2 ms; with the WAL writer woken during batches
/// ([`WAL_NUDGE_INTERVAL`]) no extra writer is needed to overlap commit flushes.
fn writer_count() -> usize {
    std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(2, MAX_WRITERS)
}

/// Most writer tasks (and backends appending at once) of one store, whatever the core count.
const MAX_WRITERS: usize = 16;

/// Most appends one writer puts in one transaction. Bounds the latency one batch adds to the
/// appends queued behind it.
const MAX_BATCH_APPENDS: usize = 256;

/// Most events in one batch transaction: positions number the events of a transaction in 16 bits.
/// A batch always takes its first append ([`crate::MAX_APPEND_EVENTS`] fits), then more while
/// they fit.
const MAX_BATCH_EVENTS: usize = 1 << POSITION_SHIFT;

const _: () = assert!(crate::types::MAX_APPEND_EVENTS <= MAX_BATCH_EVENTS);

/// Bytes of COPY data sent per message: large enough that framing costs nothing, small enough
/// that the server starts inserting while the rest is still being encoded.
const COPY_CHUNK_BYTES: usize = 256 * 1024;

// Stream reads (schema version 4). Only the first event of each append, its head, is in the
// stream index (`events_stream_heads`, partial: `append_len > 0`; heads of appends of two or more
// events are also in `events_stream_multi`, `append_len > 1`). The rest of an append is found by
// position, as an append's events have consecutive versions *and* consecutive positions. A read
// of the window of versions `[$2, $2 + $3)` is: the heads inside it, read as they are (a stream
// of one-event appends is one index range, as before version 4); and, for each longer append
// overlapping the window (the last head at or before its start, and the multi-event heads
// inside it), the position range of its other events inside the window. Exactly the window's
// rows are read; they come back grouped, and `read_stream` puts them in version order.
// `NULL` is sent for `stream_id` (the caller knows it), keeping the column layout of
// `row_to_event` without shipping and allocating the name once per row.
// $1 stream, $2 first version wanted, $3 most events.
const SQL_READ_FORWARD: &str = "WITH s AS (SELECT stream_no FROM streams WHERE stream_id = $1) \
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata \
       FROM events e \
      WHERE e.stream_no = (SELECT stream_no FROM s) AND e.append_len > 0 \
        AND e.version >= $2 AND e.version < $2 + $3 \
     UNION ALL \
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata \
       FROM ((SELECT h.position, h.version, h.append_len FROM events h \
               WHERE h.stream_no = (SELECT stream_no FROM s) AND h.append_len > 0 \
                 AND h.version <= $2 \
               ORDER BY h.version DESC LIMIT 1) \
             UNION ALL \
             (SELECT h.position, h.version, h.append_len FROM events h \
               WHERE h.stream_no = (SELECT stream_no FROM s) AND h.append_len > 1 \
                 AND h.version > $2 AND h.version < $2 + $3)) h \
      CROSS JOIN LATERAL ( \
            SELECT * FROM events e \
             WHERE e.position >= h.position + GREATEST($2 - h.version, 1) \
               AND e.position < h.position + LEAST(h.append_len, $2 + $3 - h.version) \
             ORDER BY e.position LIMIT $3) e \
      WHERE h.append_len > 1";

// As forward, over the window `[low, top]`: `top` is the stream's last version or $2, whichever
// is lower, and `low` is `top - $3 + 1`. $1 stream, $2 last version wanted, $3 most events.
const SQL_READ_BACKWARD: &str = "WITH s AS (SELECT stream_no, LEAST(version, $2) - $3 + 1 AS low, LEAST(version, $2) AS top \
                FROM streams WHERE stream_id = $1) \
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata \
       FROM events e \
      WHERE e.stream_no = (SELECT stream_no FROM s) AND e.append_len > 0 \
        AND e.version >= (SELECT low FROM s) AND e.version <= (SELECT top FROM s) \
     UNION ALL \
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata \
       FROM ((SELECT h.position, h.version, h.append_len FROM events h \
               WHERE h.stream_no = (SELECT stream_no FROM s) AND h.append_len > 0 \
                 AND h.version <= (SELECT low FROM s) \
               ORDER BY h.version DESC LIMIT 1) \
             UNION ALL \
             (SELECT h.position, h.version, h.append_len FROM events h \
               WHERE h.stream_no = (SELECT stream_no FROM s) AND h.append_len > 1 \
                 AND h.version > (SELECT low FROM s) AND h.version <= (SELECT top FROM s))) h \
      CROSS JOIN s CROSS JOIN LATERAL ( \
            SELECT * FROM events e \
             WHERE e.position >= h.position + GREATEST(s.low - h.version, 1) \
               AND e.position < h.position + LEAST(h.append_len, s.top + 1 - h.version) \
             ORDER BY e.position LIMIT $3) e \
      WHERE h.append_len > 1";

/// `$all` is read only below the oldest transaction still running: everything under that line
/// is final, so a later read never finds an event behind one already returned.
const SQL_READ_ALL: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata \
     FROM events WHERE position >= $1 \
       AND position < ((pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 16) \
     ORDER BY position LIMIT $2";

/// Options of the PostgreSQL backend.
#[derive(Debug, Clone, Default)]
pub(crate) struct PgOptions {
    pub(crate) schema: Option<String>,
    pub(crate) pool_size: Option<usize>,
    pub(crate) application_name: Option<String>,
}

/// The PostgreSQL backend. Cloning shares the pool and the LISTEN task.
#[derive(Clone)]
pub(crate) struct PgStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: Pool,
    /// Bumped after each local append and each NOTIFY received; subscribers wait on it.
    wake: Arc<watch::Sender<u64>>,
    /// The writers ([`writer_count`]); a writer task ends when its queue is dropped.
    writers: Vec<Writer>,
    router: Arc<Router>,
    shared: WriterShared,
    background: tokio::task::JoinHandle<()>,
    nudger: tokio::task::JoinHandle<()>,
}

/// An append waiting in a writer's queue.
struct PendingAppend {
    stream: String,
    expected: ExpectedVersion,
    /// `expected` as `galleon_append` takes it.
    expected_code: i64,
    events: Vec<EventData>,
    reply: oneshot::Sender<Result<AppendResult>>,
    /// Keeps the stream routed to this append's writer until the append is done with.
    _route: RouteGuard,
}

/// Which writer has appends of which stream queued or running. An append of a stream listed
/// here goes to that writer (so one process never has two transactions appending to one stream:
/// they would queue on its row lock, or both try to create it); any other append goes to the
/// writer with the fewest appends queued or running, so a burst is spread evenly.
#[derive(Default)]
struct Router {
    /// Stream name -> (writer index, appends of the stream routed and not yet done).
    streams: std::sync::Mutex<std::collections::HashMap<String, (usize, usize)>>,
}

impl Router {
    /// Picks the writer for an append of `stream` and counts the append in its `busy`; `true`
    /// with it when no writer had anything queued or running: then the caller runs the append
    /// itself. Under concurrency every append queues, so a burst goes in batches (COPY) and none
    /// through `galleon_append`'s slower per-row insert (10 writers: 6.9-7.4 ms vs 7.1-8.2 ms).
    fn route(self: &Arc<Self>, stream: &str, writers: &[Writer]) -> (usize, bool, RouteGuard) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        let w = match streams.get_mut(stream) {
            Some((w, n)) => {
                *n += 1;
                *w
            }
            None => {
                let w = (0..writers.len())
                    .min_by_key(|&i| writers[i].busy.load(Ordering::Acquire))
                    .expect("at least one writer");
                streams.insert(stream.to_owned(), (w, 1));
                w
            }
        };
        let idle = writers[w].busy.fetch_add(1, Ordering::AcqRel) == 0
            && writers
                .iter()
                .enumerate()
                .all(|(i, other)| i == w || other.busy.load(Ordering::Acquire) == 0);
        let guard = RouteGuard {
            router: self.clone(),
            stream: stream.to_owned(),
        };
        (w, idle, guard)
    }
}

/// Releases an append's routing entry when the append is done (or dropped).
struct RouteGuard {
    router: Arc<Router>,
    stream: String,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        let mut streams = self
            .router
            .streams
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some((_, n)) = streams.get_mut(&self.stream) {
            *n -= 1;
            if *n == 0 {
                streams.remove(&self.stream);
            }
        }
    }
}

/// One writer: its task's queue, and how many appends of its streams are queued or running.
struct Writer {
    queue: mpsc::Sender<PendingAppend>,
    /// Appends of this writer's streams queued or in flight, including ones run directly by
    /// their caller. An append that finds 0 here and in every other writer runs at once in its
    /// caller's task: a lone writer pays no hand-over to the writer task and back.
    busy: Arc<AtomicUsize>,
    /// Held by whichever transaction of this writer runs: an append run directly by its caller,
    /// or the writer task's batch. One at a time, so appends that queue behind a direct one wait
    /// for it and then go in one batch, instead of a small batch racing it.
    slot: Arc<tokio::sync::Mutex<()>>,
}

/// Decrements a writer's `busy` count when an append it counted is answered (or dropped).
struct BusyGuard(Arc<AtomicUsize>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Counts a group-commit batch in `WriterShared::batches` while it lives, so the count drops
/// even if the batch's future unwinds.
struct BatchGuard<'a>(&'a watch::Sender<usize>);

impl<'a> BatchGuard<'a> {
    fn new(batches: &'a watch::Sender<usize>) -> Self {
        batches.send_modify(|n| *n += 1);
        BatchGuard(batches)
    }
}

impl Drop for BatchGuard<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

/// What a writer task shares with the store.
#[derive(Clone)]
struct WriterShared {
    pool: Pool,
    wake: Arc<watch::Sender<u64>>,
    /// Bumped after each committed batch; the background task turns it into NOTIFYs.
    appended: Arc<watch::Sender<u64>>,
    /// Group-commit batches being written; [`nudge_wal_writer`] works while this is above 0.
    batches: Arc<watch::Sender<usize>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.background.abort();
        self.nudger.abort();
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("pool", &self.inner.pool.status())
            .finish_non_exhaustive()
    }
}

/// Longest identifier PostgreSQL keeps (`NAMEDATALEN - 1` in a default build).
const MAX_IDENTIFIER_BYTES: usize = 63;

/// Schema names we accept: they are put into `search_path`, so keep them to plain identifiers.
fn valid_schema(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_IDENTIFIER_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !s.as_bytes()[0].is_ascii_digit()
}

impl PgStore {
    pub(crate) async fn open(url: &str, opts: PgOptions) -> Result<Self> {
        let mut config: tokio_postgres::Config =
            url.parse()
                .map_err(|e: tokio_postgres::Error| Error::InvalidUrl {
                    url: url.to_owned(),
                    reason: e.to_string(),
                })?;
        // Session settings of every connection, after any the URL carries. Generic plans: the
        // stream reads are planned once per connection, not at every call (PostgreSQL keeps
        // re-planning a statement whose generic plan it estimates dearer than its custom ones:
        // 0.2-0.4 ms of planning for a 0.1 ms read); every statement here is a key lookup or
        // a range on a key, for which the generic plan is the plan.
        let mut options = config.get_options().unwrap_or_default().to_owned();
        options.push_str(" -c plan_cache_mode=force_generic_plan");
        if let Some(schema) = &opts.schema {
            if !valid_schema(schema) {
                return Err(Error::InvalidInput(format!(
                    "schema name {schema:?} must be 1-63 characters of a-z, 0-9 and _, not starting with a digit"
                )));
            }
            options.push_str(&format!(" -c search_path={schema}"));
        }
        config.options(options.trim_start());
        if let Some(app) = &opts.application_name {
            config.application_name(app);
        }
        // Create the schema and migrate on a connection of our own, before the pool exists.
        let (client, conn) = config.connect(NoTls).await?;
        let driver = tokio::spawn(conn);
        let migrated = migrate(&client, opts.schema.as_deref()).await;
        drop(client);
        let _ = driver.await;
        migrated?;

        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(opts.pool_size.unwrap_or(DEFAULT_POOL_SIZE).max(1))
            .build()
            .map_err(|e| Error::InvalidInput(format!("cannot build the connection pool: {e}")))?;
        let (wake, _) = watch::channel(0u64);
        let wake = Arc::new(wake);
        let (appended, appended_rx) = watch::channel(0u64);
        let (batches, batches_rx) = watch::channel(0usize);
        let shared = WriterShared {
            pool: pool.clone(),
            wake: wake.clone(),
            appended: Arc::new(appended),
            batches: Arc::new(batches),
        };
        let writers = (0..writer_count())
            .map(|_| {
                let (queue, rx) = mpsc::channel(MAX_BATCH_APPENDS);
                let busy = Arc::new(AtomicUsize::new(0));
                let slot = Arc::new(tokio::sync::Mutex::new(()));
                tokio::spawn(writer_loop(shared.clone(), rx, busy.clone(), slot.clone()));
                Writer { queue, busy, slot }
            })
            .collect();
        let nudger = tokio::spawn(nudge_wal_writer(config.clone(), batches_rx));
        let background = tokio::spawn(listen_and_notify(config, wake.clone(), appended_rx));
        Ok(PgStore {
            inner: Arc::new(Inner {
                pool,
                wake,
                writers,
                router: Arc::default(),
                shared,
                background,
                nudger,
            }),
        })
    }

    /// Queues the append for the writer of its stream and waits for the result. Dropping the
    /// future does not cancel the append: it is stored whole or not at all, like any append whose
    /// caller went away.
    pub(crate) async fn append(
        &self,
        stream: &str,
        expected: ExpectedVersion,
        events: Vec<EventData>,
    ) -> Result<AppendResult> {
        let expected_code: i64 = match expected {
            ExpectedVersion::Any => -1,
            ExpectedVersion::NoStream => -2,
            ExpectedVersion::StreamExists => -3,
            ExpectedVersion::Exact(v) => i64::try_from(v).map_err(|_| {
                Error::InvalidInput(format!("expected version {v} is out of range"))
            })?,
        };
        let inner = &self.inner;
        let (w, idle, route) = inner.router.route(stream, &inner.writers);
        let writer = &inner.writers[w];
        let guard = BusyGuard(writer.busy.clone());
        let (reply, rx) = oneshot::channel();
        let pending = PendingAppend {
            stream: stream.to_owned(),
            expected,
            expected_code,
            events,
            reply,
            _route: route,
        };
        let direct = if idle {
            writer.slot.clone().try_lock_owned().ok()
        } else {
            None
        };
        if let Some(_slot) = direct {
            // No other append of this writer's is queued or running: no group to join.
            let result = append_single(&inner.pool, &pending).await;
            if matches!(result, Ok((_, true))) {
                inner.shared.announce();
            }
            return result.map(|(r, _)| r);
        }
        if writer.queue.send(pending).await.is_err() {
            return Err(Error::Closed);
        }
        // The writer task answers (and decrements `busy` then); don't count this one twice.
        std::mem::forget(guard);
        rx.await.map_err(|_| Error::Closed)?
    }

    pub(crate) async fn read_stream(
        &self,
        stream: &str,
        from_version: u64,
        max: usize,
        direction: Direction,
    ) -> Result<Vec<RecordedEvent>> {
        let sql = match direction {
            Direction::Forward => SQL_READ_FORWARD,
            Direction::Backward => SQL_READ_BACKWARD,
        };
        // Bounded so that `from + max` (forward) and `top - max` (backward) cannot overflow.
        let from = from_version.min(MAX_READ_VERSION) as i64;
        let limit = max.min(crate::MAX_READ_EVENTS) as i64;
        let rows = self
            .query_with_retry(sql, &[&stream, &from, &limit])
            .await?;
        if rows.is_empty() {
            let exists = self
                .query_with_retry("SELECT 1 FROM streams WHERE stream_id = $1", &[&stream])
                .await?;
            if exists.is_empty() {
                return Err(Error::StreamNotFound(stream.to_owned()));
            }
        }
        let mut events = rows
            .iter()
            .map(|r| row_to_event(r, Some(stream)))
            .collect::<Result<Vec<_>>>()?;
        // The rows come grouped by append (see `SQL_READ_FORWARD`); at most `max` of them.
        match direction {
            Direction::Forward => events.sort_unstable_by_key(|e| e.version),
            Direction::Backward => events.sort_unstable_by_key(|e| std::cmp::Reverse(e.version)),
        }
        events.truncate(max);
        check_consecutive(stream, &events, from_version, direction)?;
        Ok(events)
    }

    pub(crate) async fn read_all(
        &self,
        from_position: u64,
        max: usize,
    ) -> Result<Vec<RecordedEvent>> {
        let from = from_position.min(i64::MAX as u64) as i64;
        let rows = self
            .query_with_retry(SQL_READ_ALL, &[&from, &(max as i64)])
            .await?;
        rows.iter().map(|r| row_to_event(r, None)).collect()
    }

    /// Runs a read-only prepared query; on a broken pooled connection (server restarted,
    /// backend terminated) drops that connection and tries once more on a fresh one. Reads
    /// are safe to repeat; appends are not retried here (callers retry them with the same
    /// event ids, which makes the retry idempotent).
    async fn query_with_retry(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<tokio_postgres::Row>> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let client = self.inner.pool.get().await?;
            let result = match client.prepare_cached(sql).await {
                Ok(stmt) => client.query(&stmt, params).await,
                Err(e) => Err(e),
            };
            match result {
                Ok(rows) => return Ok(rows),
                Err(e) if is_broken(&e) => {
                    discard_if_broken(client, &e);
                    if attempt >= READ_ATTEMPTS {
                        return Err(e.into());
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    pub(crate) fn wake(&self) -> watch::Receiver<u64> {
        self.inner.wake.subscribe()
    }
}

/// A writer task: takes the appends queued for it, as many as are waiting (up to
/// [`MAX_BATCH_APPENDS`] and [`MAX_BATCH_EVENTS`]), and stores them in one transaction: group
/// commit. Ends when the store is dropped and its queue is empty.
async fn writer_loop(
    shared: WriterShared,
    mut rx: mpsc::Receiver<PendingAppend>,
    busy: Arc<AtomicUsize>,
    slot: Arc<tokio::sync::Mutex<()>>,
) {
    let mut carry: Option<PendingAppend> = None;
    loop {
        let first = match carry.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        // Appends reach a writer only while another of its appends is queued or running, that is
        // under concurrency: wait for a direct append of this writer to finish, and let the other
        // ready tasks run (and queue theirs) before taking.
        let _slot = slot.lock().await;
        tokio::task::yield_now().await;
        let mut events = first.events.len();
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH_APPENDS {
            match rx.try_recv() {
                Ok(p) if events + p.events.len() > MAX_BATCH_EVENTS => {
                    carry = Some(p);
                    break;
                }
                Ok(p) => {
                    events += p.events.len();
                    batch.push(p);
                }
                Err(_) => break,
            }
        }
        let appends = batch.len();
        let answers = if appends == 1 {
            let p = batch.pop().expect("one append");
            let result = append_single(&shared.pool, &p).await;
            vec![(p.reply, result)]
        } else {
            let _writing = BatchGuard::new(&shared.batches);
            append_batch(&shared.pool, batch).await
        };
        // Subscribers are woken before the callers learn of their appends, as with a direct one.
        if answers.iter().any(|(_, r)| matches!(r, Ok((_, true)))) {
            shared.announce();
        }
        busy.fetch_sub(appends, Ordering::AcqRel);
        for (reply, result) in answers {
            let _ = reply.send(result.map(|(r, _)| r));
        }
    }
}

/// An append's caller and its outcome (`true` with it when events were stored now).
type Answer = (
    oneshot::Sender<Result<AppendResult>>,
    Result<(AppendResult, bool)>,
);

impl WriterShared {
    /// Wakes local subscribers and has the background task NOTIFY other processes.
    fn announce(&self) {
        self.wake.send_modify(|v| *v = v.wrapping_add(1));
        self.appended.send_modify(|v| *v = v.wrapping_add(1));
    }
}

/// Result row of `galleon_append` / `galleon_append_batch`.
#[derive(Clone, Copy)]
struct Outcome {
    status: i32,
    actual: Option<i64>,
    first_version: Option<i64>,
    first_position: Option<i64>,
    /// The stream's number (`galleon_append_batch` only, for the events the caller COPYs).
    stream_no: Option<i64>,
}

impl Outcome {
    fn from_row(row: &tokio_postgres::Row) -> Result<Outcome> {
        Ok(Outcome {
            status: row.try_get(0)?,
            actual: row.try_get(1)?,
            first_version: row.try_get(2)?,
            first_position: row.try_get(3)?,
            stream_no: if row.len() > 4 { row.try_get(4)? } else { None },
        })
    }

    /// The caller's answer; `true` with it when the append stored events now.
    fn into_result(self, p: &PendingAppend) -> Result<(AppendResult, bool)> {
        let n = p.events.len() as u64;
        match (self.status, self.first_version, self.first_position) {
            (0 | 1, Some(fv), Some(fp)) => {
                let (fv, fp) = (fv as u64, fp as u64);
                Ok((
                    AppendResult {
                        first_version: fv,
                        last_version: fv + n - 1,
                        first_position: fp,
                        last_position: fp + n - 1,
                    },
                    self.status == 0,
                ))
            }
            (2, _, _) => Err(Error::WrongExpectedVersion {
                expected: p.expected,
                actual: self.actual.map(|v| v as u64),
            }),
            (3, _, _) => Err(Error::DuplicateEventId(p.events[0].id)),
            (other, _, _) => Err(Error::Corrupt(format!(
                "galleon_append returned status {other} without the expected fields"
            ))),
        }
    }
}

/// One append in its own transaction: one `galleon_append` call, one round trip. Used for a
/// batch of one (no latency added to a lone writer) and, per append, when a batch fails.
async fn append_single(pool: &Pool, p: &PendingAppend) -> Result<(AppendResult, bool)> {
    let ids: Vec<uuid::Uuid> = p.events.iter().map(|e| e.id).collect();
    let types: Vec<&str> = p.events.iter().map(|e| e.event_type.as_str()).collect();
    let data: Vec<JsonText<'_>> = p.events.iter().map(|e| JsonText(e.data.get())).collect();
    let meta: Vec<JsonText<'_>> = p
        .events
        .iter()
        .map(|e| JsonText(e.metadata.get()))
        .collect();
    let client = pool.get().await?;
    let stmt = match client.prepare_cached(SQL_APPEND).await {
        Ok(stmt) => stmt,
        Err(e) => {
            discard_if_broken(client, &e);
            return Err(e.into());
        }
    };
    // A unique violation means an id of this append was stored by a concurrent call between
    // our idempotency check and our insert; one more try sees it and answers accordingly.
    let mut attempt = 0;
    let row = loop {
        attempt += 1;
        match client
            .query_one(
                &stmt,
                &[&p.stream, &p.expected_code, &ids, &types, &data, &meta],
            )
            .await
        {
            Ok(row) => break row,
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) && attempt < 2 => continue,
            Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
                let dup: Option<uuid::Uuid> = client
                    .query_opt(
                        "SELECT event_id FROM events WHERE event_id = ANY($1) LIMIT 1",
                        &[&ids],
                    )
                    .await?
                    .and_then(|r| r.try_get(0).ok());
                return match dup {
                    Some(id) => Err(Error::DuplicateEventId(id)),
                    None => Err(e.into()),
                };
            }
            Err(e) => {
                discard_if_broken(client, &e);
                return Err(e.into());
            }
        }
    };
    drop(client);
    Outcome::from_row(&row)?.into_result(p)
}

/// Group commit of two or more appends: one transaction, in which `galleon_append_batch` checks
/// every append and reserves versions and positions for the accepted ones, then one COPY of all
/// their events, then one commit (one WAL flush). Appends whose first id is stored already
/// (retries, duplicates) are answered afterwards by `galleon_append`. If the batch fails in any
/// way (a concurrent process wrote the same stream or id, a dropped connection), nothing of it is
/// known to be committed, so every append is run again on its own: a retry with the same ids is
/// idempotent, so even a batch that did commit before the connection dropped is answered
/// correctly, and every caller gets the outcome of its own append.
async fn append_batch(pool: &Pool, batch: Vec<PendingAppend>) -> Vec<Answer> {
    let outcomes = match try_batch(pool, &batch).await {
        Ok(outcomes) => outcomes,
        Err(e) => {
            tracing::debug!(error = %e, appends = batch.len(), "group commit failed; appending one by one");
            vec![None; batch.len()]
        }
    };
    let mut answers = Vec::with_capacity(batch.len());
    for (p, outcome) in batch.into_iter().zip(outcomes) {
        let result = match outcome {
            Some(o) => o.into_result(&p),
            None => append_single(pool, &p).await,
        };
        answers.push((p.reply, result));
    }
    answers
}

/// The batch transaction. Returns one entry per append: its outcome, or `None` when it is to be
/// run on its own (its first id is stored already).
async fn try_batch(pool: &Pool, batch: &[PendingAppend]) -> Result<Vec<Option<Outcome>>> {
    let streams: Vec<&str> = batch.iter().map(|p| p.stream.as_str()).collect();
    let expected: Vec<i64> = batch.iter().map(|p| p.expected_code).collect();
    let counts: Vec<i32> = batch.iter().map(|p| p.events.len() as i32).collect();
    let first_ids: Vec<uuid::Uuid> = batch.iter().map(|p| p.events[0].id).collect();
    let mut client = pool.get().await?;
    let result = async {
        let check = client.prepare_cached(SQL_APPEND_BATCH).await?;
        let copy = client.prepare_cached(SQL_COPY_EVENTS).await?;
        let tx = client.transaction().await?;
        let rows = tx
            .query(&check, &[&streams, &expected, &counts, &first_ids])
            .await?;
        if rows.len() != batch.len() {
            return Err(Error::Corrupt(format!(
                "galleon_append_batch returned {} rows for {} appends",
                rows.len(),
                batch.len()
            )));
        }
        let outcomes = rows
            .iter()
            .map(Outcome::from_row)
            .collect::<Result<Vec<_>>>()?;
        let mut accepted: Vec<(&PendingAppend, i64, i64, i64)> = batch
            .iter()
            .zip(&outcomes)
            .filter_map(
                |(p, o)| match (o.status, o.first_version, o.first_position, o.stream_no) {
                    (0, Some(fv), Some(fp), Some(sno)) => Some((p, fv, fp, sno)),
                    _ => None,
                },
            )
            .collect();
        // An accepted append must have all three (else its events would not be copied).
        if accepted.len() != outcomes.iter().filter(|o| o.status == 0).count() {
            return Err(Error::Corrupt(
                "galleon_append_batch accepted an append without version, position or stream number"
                    .to_owned(),
            ));
        }
        // In position order (the function numbers the appends grouped by stream): each
        // insert into the primary key then lands at its right end. Each append's first row
        // carries its length, and only that row enters the stream indexes (schema version 4).
        accepted.sort_unstable_by_key(|&(_, _, fp, _)| fp);
        if !accepted.is_empty() {
            let sink = tx.copy_in::<_, bytes::Bytes>(&copy).await?;
            futures::pin_mut!(sink);
            let mut buf = bytes::BytesMut::with_capacity(COPY_CHUNK_BYTES + 4096);
            buf.extend_from_slice(b"PGCOPY\n\xff\r\n\0");
            buf.extend_from_slice(&0i32.to_be_bytes()); // flags
            buf.extend_from_slice(&0i32.to_be_bytes()); // header extension
            for (p, fv, fp, sno) in accepted {
                // The append's length on its first event, 0 on the rest (schema version 4).
                let len = i16::try_from(p.events.len()).expect("MAX_APPEND_EVENTS fits i16");
                for (i, e) in p.events.iter().enumerate() {
                    let append_len = if i == 0 { len } else { 0 };
                    copy_row(
                        &mut buf,
                        fp + i as i64,
                        sno,
                        &p.stream,
                        fv + i as i64,
                        e,
                        append_len,
                    );
                    if buf.len() >= COPY_CHUNK_BYTES {
                        sink.send(buf.split().freeze()).await?;
                    }
                }
            }
            buf.extend_from_slice(&(-1i16).to_be_bytes());
            sink.send(buf.freeze()).await?;
            sink.finish().await?;
        }
        tx.commit().await?;
        Ok(outcomes)
    }
    .await;
    match result {
        Ok(outcomes) => Ok(outcomes
            .into_iter()
            .map(|o| (o.status != 4).then_some(o))
            .collect()),
        Err(e) => {
            if let Error::Postgres(pg) = &e {
                discard_if_broken(client, pg);
            }
            Err(e)
        }
    }
}

/// Appends one event row to binary COPY data: field count, then each field as length + bytes
/// (`json` travels as its text, like `text`).
fn copy_row(
    buf: &mut bytes::BytesMut,
    position: i64,
    stream_no: i64,
    stream: &str,
    version: i64,
    e: &EventData,
    append_len: i16,
) {
    fn field(buf: &mut bytes::BytesMut, bytes: &[u8]) {
        buf.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        buf.extend_from_slice(bytes);
    }
    buf.extend_from_slice(&9i16.to_be_bytes());
    field(buf, &position.to_be_bytes());
    field(buf, &stream_no.to_be_bytes());
    field(buf, stream.as_bytes());
    field(buf, &version.to_be_bytes());
    field(buf, e.id.as_bytes());
    field(buf, e.event_type.as_bytes());
    field(buf, e.data.get().as_bytes());
    field(buf, e.metadata.get().as_bytes());
    field(buf, &append_len.to_be_bytes());
}

/// Largest first version a stream read asks PostgreSQL for: far above any real version, and
/// leaves room for adding [`crate::MAX_READ_EVENTS`] (the most one read returns; `Store` clamps
/// to it too) without overflowing a `bigint`.
const MAX_READ_VERSION: u64 = 1 << 62;

/// A stream read returns consecutive versions, starting at or after `from` (forward) or at or
/// before it (backward). The stream index holds only the first event of each append since schema
/// version 4 (the rest are found by position), so this is checked on every read: a stored append
/// whose head disagrees with its events is reported, never returned as a gap or a repeat.
fn check_consecutive(
    stream: &str,
    events: &[RecordedEvent],
    from: u64,
    direction: Direction,
) -> Result<()> {
    let mut expected: Option<u64> = None;
    for e in events {
        let ok = match (expected, direction) {
            (Some(v), _) => e.version == v,
            (None, Direction::Forward) => e.version >= from,
            (None, Direction::Backward) => e.version <= from,
        };
        if !ok {
            return Err(Error::Corrupt(format!(
                "stream {stream:?}: read returned version {} where {} was due",
                e.version,
                expected.map_or_else(|| format!("a version from {from}"), |v| v.to_string())
            )));
        }
        expected = Some(match direction {
            Direction::Forward => e.version + 1,
            Direction::Backward => e.version.wrapping_sub(1),
        });
    }
    Ok(())
}

/// Is this error the connection's, not the statement's? Then the connection is useless.
fn is_broken(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => code.code().starts_with("08") || code.code().starts_with("57"),
        None => e.as_db_error().is_none(),
    }
}

/// Keeps a broken connection out of the pool (deadpool's fast recycling only notices a closed
/// connection once its background task has seen the socket close, which can be later).
fn discard_if_broken(client: deadpool_postgres::Object, e: &tokio_postgres::Error) {
    if is_broken(e) {
        drop(deadpool_postgres::Object::take(client));
    }
}

/// Decodes one event row; `stream` when the query left column 1 `NULL` because the caller knows
/// the stream. The JSON columns are of type `json`, which PostgreSQL checked on insert, so they
/// are taken as they are.
fn row_to_event(row: &tokio_postgres::Row, stream: Option<&str>) -> Result<RecordedEvent> {
    let position: i64 = row.try_get(0)?;
    let version: i64 = row.try_get(2)?;
    Ok(RecordedEvent {
        position: position as u64,
        stream_id: match stream {
            Some(s) => s.to_owned(),
            None => row.try_get(1)?,
        },
        version: version as u64,
        id: row.try_get(3)?,
        event_type: row.try_get(4)?,
        data: Json::trusted(row.try_get::<_, JsonColumn>(5)?.0),
        metadata: Json::trusted(row.try_get::<_, JsonColumn>(6)?.0),
    })
}

/// A `json` column read as is: its binary wire format is the text itself, so no `::text` cast
/// is needed on the server (a read of 100 events measured ~10% faster without the casts).
struct JsonColumn(String);

impl<'a> tokio_postgres::types::FromSql<'a> for JsonColumn {
    fn from_sql(
        _ty: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(JsonColumn(std::str::from_utf8(raw)?.to_owned()))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON
    }
}

/// Checked JSON text bound to a `json` parameter: the binary wire format of `json` is the text
/// itself, so it is copied into the message as is (no serde on the way out).
#[derive(Debug)]
pub(crate) struct JsonText<'a>(pub(crate) &'a str);

impl ToSql for JsonText<'_> {
    fn to_sql(
        &self,
        _ty: &Type,
        out: &mut bytes::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.extend_from_slice(self.0.as_bytes());
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::JSON
    }

    to_sql_checked!();
}

/// Creates the schema (if named) and applies the missing migrations in one transaction, under an
/// advisory lock so that processes starting together migrate one after the other.
async fn migrate(client: &tokio_postgres::Client, schema: Option<&str>) -> Result<()> {
    migrate_to(client, schema, MIGRATIONS.len()).await
}

/// [`migrate`] up to schema version `target` (tests build older schemas with it).
async fn migrate_to(
    client: &tokio_postgres::Client,
    schema: Option<&str>,
    target: usize,
) -> Result<()> {
    client.batch_execute("BEGIN").await?;
    let result = async {
        client
            .execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK_KEY])
            .await?;
        if let Some(schema) = schema {
            // Validated by `valid_schema`, so safe to splice.
            client
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
                .await?;
        }
        client
            .batch_execute(
                "CREATE TABLE IF NOT EXISTS schema_version (
                    version    bigint PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now())",
            )
            .await?;
        let current: i64 = client
            .query_one("SELECT COALESCE(MAX(version), 0) FROM schema_version", &[])
            .await?
            .try_get(0)?;
        let supported = MIGRATIONS.len() as i64;
        if current > supported {
            return Err(Error::SchemaTooNew {
                found: current,
                supported,
            });
        }
        for (i, sql) in MIGRATIONS
            .iter()
            .enumerate()
            .take(target)
            .skip(current as usize)
        {
            client.batch_execute(sql).await?;
            client
                .execute(
                    "INSERT INTO schema_version (version) VALUES ($1)",
                    &[&(i as i64 + 1)],
                )
                .await?;
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => client.batch_execute("COMMIT").await?,
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            return Err(e);
        }
    }
    Ok(())
}

/// The store's one long-lived extra connection: it LISTENs (turning notifications into wake-ups
/// of local subscribers) and sends one NOTIFY per burst of local appends, outside the append
/// transactions: a NOTIFY inside them would take PostgreSQL's database-wide notify lock at every
/// commit, a global lock by another name. A dropped connection is reopened with backoff, and
/// every (re)connection wakes subscribers, which then re-read what they may have missed.
async fn listen_and_notify(
    config: tokio_postgres::Config,
    wake: Arc<watch::Sender<u64>>,
    mut appended: watch::Receiver<u64>,
) {
    let mut backoff = RECONNECT_MIN;
    loop {
        match config.connect(NoTls).await {
            Ok((client, mut conn)) => {
                let wake_driver = wake.clone();
                let mut driver = tokio::spawn(async move {
                    let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
                    while let Some(msg) = messages.next().await {
                        match msg {
                            Ok(AsyncMessage::Notification(_)) => {
                                wake_driver.send_modify(|v| *v = v.wrapping_add(1))
                            }
                            Ok(_) => {}
                            Err(e) => {
                                tracing::warn!(error = %e, "event store LISTEN connection failed");
                                break;
                            }
                        }
                    }
                });
                let setup = client
                    .batch_execute(&format!(
                        "SET synchronous_commit = off; LISTEN {NOTIFY_CHANNEL}"
                    ))
                    .await;
                if setup.is_ok() {
                    backoff = RECONNECT_MIN;
                    wake.send_modify(|v| *v = v.wrapping_add(1));
                    loop {
                        tokio::select! {
                            changed = appended.changed() => {
                                if changed.is_err() {
                                    driver.abort();
                                    return;
                                }
                                let sent = client
                                    .execute("SELECT pg_notify($1, '')", &[&NOTIFY_CHANNEL])
                                    .await;
                                if let Err(e) = sent {
                                    tracing::warn!(error = %e, "event store NOTIFY failed");
                                    break;
                                }
                                // Appends during the pause mark `appended` changed, so they are
                                // announced by the next NOTIFY, right after it.
                                tokio::time::sleep(NOTIFY_MIN_INTERVAL).await;
                            }
                            _ = &mut driver => break,
                        }
                    }
                }
                driver.abort();
            }
            Err(e) => {
                tracing::warn!(error = %e, "event store LISTEN connection could not be opened")
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}

/// Wakes PostgreSQL's WAL writer every [`WAL_NUDGE_INTERVAL`] while group-commit batches are
/// being written (`batches` above 0), with an empty transaction that takes a transaction id and
/// commits asynchronously: such a commit sets the WAL writer's latch, and the WAL writer then
/// flushes the WAL written so far (see [`WAL_NUDGE_INTERVAL`]). It changes no data, holds no
/// lock and is never waited for by an append; a failed connection is reopened with backoff, and
/// appends meanwhile only commit as they would without it. Each nudge uses one transaction id.
async fn nudge_wal_writer(config: tokio_postgres::Config, mut batches: watch::Receiver<usize>) {
    let mut backoff = RECONNECT_MIN;
    loop {
        if batches.wait_for(|n| *n > 0).await.is_err() {
            return;
        }
        match config.connect(NoTls).await {
            Ok((client, conn)) => {
                let driver = tokio::spawn(conn);
                let setup = client.batch_execute("SET synchronous_commit = off").await;
                if setup.is_ok() {
                    backoff = RECONNECT_MIN;
                    loop {
                        if batches.wait_for(|n| *n > 0).await.is_err() {
                            driver.abort();
                            return;
                        }
                        let nudged = client
                            .batch_execute("BEGIN; SELECT pg_current_xact_id(); COMMIT")
                            .await;
                        if let Err(e) = nudged {
                            tracing::debug!(error = %e, "event store WAL nudge failed");
                            break;
                        }
                        tokio::time::sleep(WAL_NUDGE_INTERVAL).await;
                    }
                }
                driver.abort();
            }
            Err(e) => {
                tracing::debug!(error = %e, "event store WAL nudge connection could not be opened")
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_uses_the_position_shift() {
        let shift = format!("<< {POSITION_SHIFT}");
        let per_txn = format!("{}", 1u64 << POSITION_SHIFT);
        // Migration 3 replaces both functions of 1 and 2; migration 4 `galleon_append` again.
        for (m, functions) in [(0, 1), (1, 1), (2, 2), (3, 1)] {
            assert!(
                MIGRATIONS[m].matches(&shift).count() >= functions,
                "migration {m}"
            );
            assert_eq!(
                MIGRATIONS[m].matches(&per_txn).count(),
                3 * functions,
                "migration {m}"
            );
        }
        assert_eq!(MAX_BATCH_EVENTS, 1 << POSITION_SHIFT);
        assert!(SQL_READ_ALL.contains(&shift));
    }

    /// Schemas of versions 1, 2 and 3, built by the real migrations and holding events written by
    /// their own functions, are upgraded in place when a store opens them: every stream gets a
    /// number, every event its stream's, old events read as appends of one event each, and the
    /// store reads, appends (alone and group-committed) and checks expected versions across the
    /// old and new data.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn upgrades_version_1_2_and_3_schemas_in_place() {
        let Ok(url) = std::env::var("DATABASE_URL") else {
            eprintln!("\n*** SKIPPED: PostgreSQL upgrade test, DATABASE_URL is not set ***\n");
            return;
        };
        for old in [1, 2, 3] {
            let schema = format!("galleon_test_{}", uuid::Uuid::new_v4().simple());
            let result = upgrade_from(&url, &schema, old).await;
            let (admin, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
            tokio::spawn(conn);
            admin
                .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
                .await
                .unwrap();
            result.unwrap_or_else(|e| panic!("upgrade from version {old}: {e}"));
        }
    }

    fn data(n: usize) -> Vec<EventData> {
        (0..n)
            .map(|i| {
                EventData::json("Old", &serde_json::json!({ "i": i }))
                    .unwrap()
                    .with_metadata(&serde_json::json!({ "m": i }))
                    .unwrap()
            })
            .collect()
    }

    async fn upgrade_from(url: &str, schema: &str, old: usize) -> Result<()> {
        let mut config: tokio_postgres::Config = url.parse().unwrap();
        config.options(format!("-c search_path={schema}"));
        let (raw, conn) = config.connect(NoTls).await?;
        tokio::spawn(conn);
        migrate_to(&raw, Some(schema), old).await?;
        // Events as the old schema's own function stores them.
        let old_append = "SELECT status FROM galleon_append($1, -2, $2, $3, $4, $5)";
        for (stream, n) in [("old-a", 3), ("old-b", 2)] {
            let evs = data(n);
            let ids: Vec<uuid::Uuid> = evs.iter().map(|e| e.id).collect();
            let types: Vec<&str> = evs.iter().map(|e| e.event_type.as_str()).collect();
            let d: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.data.get())).collect();
            let m: Vec<JsonText<'_>> = evs.iter().map(|e| JsonText(e.metadata.get())).collect();
            let status: i32 = raw
                .query_one(old_append, &[&stream, &ids, &types, &d, &m])
                .await?
                .get(0);
            assert_eq!(status, 0);
        }

        let store = PgStore::open(
            url,
            PgOptions {
                schema: Some(schema.to_owned()),
                pool_size: Some(8),
                application_name: None,
            },
        )
        .await?;
        let version: i64 = raw
            .query_one("SELECT max(version) FROM schema_version", &[])
            .await?
            .get(0);
        assert_eq!(version, MIGRATIONS.len() as i64);
        let unnumbered: i64 = raw
            .query_one(
                "SELECT count(*) FROM events e JOIN streams s USING (stream_id) \
                 WHERE e.stream_no IS DISTINCT FROM s.stream_no",
                &[],
            )
            .await?
            .get(0);
        assert_eq!(unnumbered, 0, "every event carries its stream's number");
        let numbers: i64 = raw
            .query_one("SELECT count(DISTINCT stream_no) FROM streams", &[])
            .await?
            .get(0);
        assert_eq!(numbers, 2);
        let constraints: Vec<String> = raw
            .query(
                "SELECT conname::text FROM pg_constraint \
                 WHERE conrelid = 'events'::regclass AND contype = 'u' ORDER BY 1",
                &[],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect();
        assert_eq!(constraints, ["events_event_id_key"]);
        // Version 4: the stream index is unique over the first events of appends only.
        let index: String = raw
            .query_one(
                "SELECT pg_get_indexdef('events_stream_heads'::regclass)",
                &[],
            )
            .await?
            .get(0);
        assert!(
            index.contains("UNIQUE")
                && index.contains("(stream_no, version) WHERE (append_len > 0)"),
            "{index}"
        );
        let multi: String = raw
            .query_one(
                "SELECT pg_get_indexdef('events_stream_multi'::regclass)",
                &[],
            )
            .await?
            .get(0);
        assert!(
            multi.contains("(stream_no, version) WHERE (append_len > 1)"),
            "{multi}"
        );
        let old_heads: i64 = raw
            .query_one("SELECT count(*) FROM events WHERE append_len = 1", &[])
            .await?
            .get(0);
        assert_eq!(
            old_heads, 5,
            "events stored before version 4 are heads of their own"
        );

        // Old data reads as before; appends continue its versions and respect expectations.
        let a = store
            .read_stream("old-a", 0, 10, Direction::Forward)
            .await?;
        assert_eq!(a.iter().map(|e| e.version).collect::<Vec<_>>(), [0, 1, 2]);
        let back = store
            .read_stream("old-a", 5, 2, Direction::Backward)
            .await?;
        assert_eq!(back.iter().map(|e| e.version).collect::<Vec<_>>(), [2, 1]);
        let r = store
            .append("old-a", ExpectedVersion::Exact(2), data(2))
            .await?;
        assert_eq!((r.first_version, r.last_version), (3, 4));
        match store
            .append("old-b", ExpectedVersion::NoStream, data(1))
            .await
        {
            Err(Error::WrongExpectedVersion { actual, .. }) => assert_eq!(actual, Some(1)),
            other => panic!("expected a wrong-version error, got {other:?}"),
        }
        // Concurrent appends (group-committed) to old and new streams.
        let tasks: Vec<_> = (0..20)
            .map(|i| {
                let store = store.clone();
                tokio::spawn(async move {
                    if i == 0 {
                        store
                            .append("old-b", ExpectedVersion::Exact(1), data(3))
                            .await
                    } else {
                        store
                            .append(&format!("new-{i}"), ExpectedVersion::NoStream, data(3))
                            .await
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap()?;
        }
        let b = store
            .read_stream("old-b", 0, 10, Direction::Forward)
            .await?;
        assert_eq!(b.len(), 5);
        let all = store.read_all(0, 1000).await?;
        assert_eq!(all.len(), 3 + 2 + 2 + 3 + 19 * 3);
        let places: i64 = raw
            .query_one(
                "SELECT count(DISTINCT (stream_no, version)) - count(DISTINCT (stream_id, version)) \
                 FROM events",
                &[],
            )
            .await?
            .get(0);
        assert_eq!(
            places, 0,
            "stream numbers and names identify the same streams"
        );
        // One head per append since the upgrade (1 + 19 + 1 appends of 2 or 3 events), carrying
        // the append's length; the old events are heads of 1.
        let heads: Vec<(i16, i64)> = raw
            .query(
                "SELECT append_len, count(*) FROM events WHERE append_len > 0 \
                 GROUP BY 1 ORDER BY 1",
                &[],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        assert_eq!(heads, [(1, 5), (2, 1), (3, 20)]);
        let back = store
            .read_stream("old-b", u64::MAX, 4, Direction::Backward)
            .await?;
        assert_eq!(
            back.iter().map(|e| e.version).collect::<Vec<_>>(),
            [4, 3, 2, 1]
        );
        Ok(())
    }

    /// The WAL writer is nudged while a batch is being written and not otherwise: no connection
    /// before the first batch, a nudge every few milliseconds during one, none after it, and the
    /// task ends with the store.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn wal_nudges_run_only_while_batches_are_written() {
        let Ok(url) = std::env::var("DATABASE_URL") else {
            eprintln!("\n*** SKIPPED: PostgreSQL WAL nudge test, DATABASE_URL is not set ***\n");
            return;
        };
        let app = format!("galleon_nudge_{}", uuid::Uuid::new_v4().simple());
        let mut config: tokio_postgres::Config = url.parse().unwrap();
        config.application_name(&app);
        let (batches, rx) = watch::channel(0usize);
        let task = tokio::spawn(nudge_wal_writer(config, rx));
        let (admin, conn) = tokio_postgres::connect(&url, NoTls).await.unwrap();
        tokio::spawn(conn);
        let look = || async {
            admin
                .query_opt(
                    "SELECT query, query_start FROM pg_stat_activity WHERE application_name = $1",
                    &[&app],
                )
                .await
                .unwrap()
                // A connection that has run no query yet has no `query_start`.
                .map(|r| {
                    (
                        r.get::<_, String>(0),
                        r.get::<_, Option<std::time::SystemTime>>(1),
                    )
                })
        };
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(look().await.is_none(), "no connection before any batch");
        batches.send_replace(1);
        let mut seen = None;
        for _ in 0..100 {
            if let Some((query, Some(at))) = look().await
                && query.contains("pg_current_xact_id")
            {
                seen = Some(at);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let first = seen.expect("a nudge within 2 s of a batch starting");
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, later) = look().await.expect("the nudge connection stays open");
        assert!(
            later > Some(first),
            "nudges repeat while the batch is written"
        );
        batches.send_replace(0);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, stopped) = look()
            .await
            .expect("the connection stays open between batches");
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (_, still) = look().await.unwrap();
        assert_eq!(stopped, still, "no nudges without a batch");
        drop(batches);
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("the nudge task ends with the store")
            .unwrap();
    }

    #[test]
    fn router_spreads_streams_and_keeps_a_stream_on_one_writer() {
        let writers: Vec<Writer> = (0..4)
            .map(|_| Writer {
                queue: mpsc::channel(1).0,
                busy: Arc::new(AtomicUsize::new(0)),
                slot: Arc::default(),
            })
            .collect();
        let router = Arc::new(Router::default());
        let mut guards = Vec::new();
        let mut idle = 0;
        for i in 0..100 {
            let (_, was_idle, g) = router.route(&format!("s-{i}"), &writers);
            idle += usize::from(was_idle);
            guards.push(g);
        }
        assert_eq!(
            idle, 1,
            "only an append that finds every writer idle runs directly; the rest queue"
        );
        let busy: Vec<usize> = writers
            .iter()
            .map(|w| w.busy.load(Ordering::Acquire))
            .collect();
        assert_eq!(busy, [25, 25, 25, 25]);
        // A stream with an append pending stays on its writer, however busy that one is.
        let (w0, _, g0) = router.route("s-7", &writers);
        let (w1, _, g1) = router.route("s-7", &writers);
        assert_eq!(w0, w1);
        let first = guards.remove(7);
        let (w2, _, g2) = router.route("s-7", &writers);
        assert_eq!(w2, w0);
        drop((first, g0, g1, g2));
        assert!(!router.streams.lock().unwrap().contains_key("s-7"));
        drop(guards);
        assert!(router.streams.lock().unwrap().is_empty());
    }

    #[test]
    fn schema_names() {
        assert!(valid_schema("galleon_test_1"));
        assert!(!valid_schema("1abc"));
        assert!(!valid_schema("a;drop"));
        assert!(!valid_schema("Upper"));
        assert!(!valid_schema(&"a".repeat(MAX_IDENTIFIER_BYTES + 1)));
    }
}
