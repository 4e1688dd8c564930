//! Reads: one stream's window of versions (schema 4: heads from the stream index, the rest of
//! each longer append by position), and `$all` below the oldest running transaction.

use deadpool_postgres::Pool;
use tokio_postgres::types::Type;

use crate::error::{Error, Result};
use crate::time::Timestamp;
use crate::types::{Direction, Json, RecordedEvent};

/// Attempts of a read when the pooled connection turns out broken: the first, then one on a
/// fresh connection. More would only wait longer on a server that is really down.
const READ_ATTEMPTS: u32 = 2;

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
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata, e.recorded_at \
       FROM events e \
      WHERE e.stream_no = (SELECT stream_no FROM s) AND e.append_len > 0 \
        AND e.version >= $2 AND e.version < $2 + $3 \
     UNION ALL \
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata, e.recorded_at \
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
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata, e.recorded_at \
       FROM events e \
      WHERE e.stream_no = (SELECT stream_no FROM s) AND e.append_len > 0 \
        AND e.version >= (SELECT low FROM s) AND e.version <= (SELECT top FROM s) \
     UNION ALL \
     SELECT e.position, NULL::text, e.version, e.event_id, e.event_type, e.data, e.metadata, e.recorded_at \
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
pub(super) const SQL_READ_ALL: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE position >= $1 \
       AND position < ((pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 16) \
     ORDER BY position LIMIT $2";

/// The line `$all` is read below: where the fan-out's reader starts.
const SQL_HEAD: &str = "SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 16";

/// `$all` of one category (`$3`), below the same line: one range of `events_category`, whose
/// expression this repeats.
const SQL_READ_CATEGORY: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE split_part(stream_id, '-', 1) = $3 AND position >= $1 \
       AND position < ((pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 16) \
     ORDER BY position LIMIT $2";

/// As [`SQL_READ_CATEGORY`], keeping the types `$4` (a filter on the category's range).
const SQL_READ_CATEGORY_TYPES: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE split_part(stream_id, '-', 1) = $3 AND position >= $1 \
       AND position < ((pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 16) \
       AND event_type = ANY($4) \
     ORDER BY position LIMIT $2";

/// `$all` of the types `$3`: one ordered range of `events_type` per type, at most `$2` each,
/// merged (a plain `event_type = ANY` would collect every match before sorting).
const SQL_READ_TYPES: &str = "WITH top AS MATERIALIZED ( \
       SELECT (pg_snapshot_xmin(pg_current_snapshot())::text::bigint) << 16 AS p) \
     SELECT e.* FROM unnest($3::text[]) AS t(name) CROSS JOIN LATERAL ( \
       SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
         FROM events WHERE event_type = t.name AND position >= $1 \
          AND position < (SELECT p FROM top) \
        ORDER BY position LIMIT $2) e \
     ORDER BY e.position LIMIT $2";

/// A stream's events from `from_version` on (forward) or back (backward), at most `max`, in
/// version order; `StreamNotFound` for a stream that was never written.
pub(super) async fn read_stream(
    pool: &Pool,
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
    let rows = query_with_retry(pool, sql, &[&stream, &from, &limit]).await?;
    if rows.is_empty() {
        let exists = query_with_retry(
            pool,
            "SELECT 1 FROM streams WHERE stream_id = $1",
            &[&stream],
        )
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

/// `$all` from `from_position` on, at most `max`: only what lies below the oldest transaction
/// still running, so nothing can appear behind a reader later.
pub(super) async fn read_all(
    pool: &Pool,
    from_position: u64,
    max: usize,
) -> Result<Vec<RecordedEvent>> {
    let from = from_position.min(i64::MAX as u64) as i64;
    let rows = query_with_retry(pool, SQL_READ_ALL, &[&from, &(max as i64)]).await?;
    rows.iter().map(|r| row_to_event(r, None)).collect()
}

/// `$all` from `from_position` on that passes `filter`, at most `max`, below the same line as
/// [`read_all`].
pub(super) async fn read_filtered(
    pool: &Pool,
    from_position: u64,
    max: usize,
    filter: &crate::filter::EventFilter,
) -> Result<Vec<RecordedEvent>> {
    let from = from_position.min(i64::MAX as u64) as i64;
    let limit = max as i64;
    let types = filter.event_types();
    let rows = match filter.category_name() {
        None if types.is_empty() => return read_all(pool, from_position, max).await,
        None => query_with_retry(pool, SQL_READ_TYPES, &[&from, &limit, &types]).await?,
        Some(c) if types.is_empty() => {
            query_with_retry(pool, SQL_READ_CATEGORY, &[&from, &limit, &c]).await?
        }
        Some(c) => {
            query_with_retry(pool, SQL_READ_CATEGORY_TYPES, &[&from, &limit, &c, &types]).await?
        }
    };
    rows.iter().map(|r| row_to_event(r, None)).collect()
}

/// The line below which `$all` is final now.
pub(super) async fn head(pool: &Pool) -> Result<u64> {
    let rows = query_with_retry(pool, SQL_HEAD, &[]).await?;
    let head: i64 = rows
        .first()
        .ok_or_else(|| Error::Corrupt("the head query returned no row".into()))?
        .try_get(0)?;
    Ok(head as u64)
}

/// Runs a read-only prepared query; on a broken pooled connection (server restarted,
/// backend terminated) drops that connection and tries once more on a fresh one. Reads
/// are safe to repeat; appends are not retried here (callers retry them with the same
/// event ids, which makes the retry idempotent).
async fn query_with_retry(
    pool: &Pool,
    sql: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<Vec<tokio_postgres::Row>> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        let client = pool.get().await?;
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
pub(super) fn is_broken(e: &tokio_postgres::Error) -> bool {
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
pub(super) fn discard_if_broken(client: deadpool_postgres::Object, e: &tokio_postgres::Error) {
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
        recorded_at: Timestamp::from(row.try_get::<_, std::time::SystemTime>(7)?),
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
