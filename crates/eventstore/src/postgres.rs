//! The PostgreSQL backend: a deadpool of tokio-postgres connections, appends through one
//! server-side function call, `$all` read below the oldest running transaction.

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures::StreamExt;
use tokio::sync::watch;
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
];

const SQL_APPEND: &str = "SELECT status, actual, first_version, first_position \
     FROM galleon_append($1, $2, $3, $4, $5, $6)";

// Stream reads send `NULL` for `stream_id` (the caller knows it), keeping the column layout of
// `row_to_event` without shipping and allocating the name once per row.
const SQL_READ_FORWARD: &str = "SELECT position, NULL::text, version, event_id, event_type, data::text, metadata::text \
     FROM events WHERE stream_id = $1 AND version >= $2 ORDER BY version LIMIT $3";

const SQL_READ_BACKWARD: &str = "SELECT position, NULL::text, version, event_id, event_type, data::text, metadata::text \
     FROM events WHERE stream_id = $1 AND version <= $2 ORDER BY version DESC LIMIT $3";

/// `$all` is read only below the oldest transaction still running: everything under that line
/// is final, so a later read never finds an event behind one already returned.
const SQL_READ_ALL: &str = "SELECT position, stream_id, version, event_id, event_type, data::text, metadata::text \
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
    /// Bumped after each local append; the background task turns it into NOTIFYs.
    appended: watch::Sender<u64>,
    background: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.background.abort();
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
        if let Some(schema) = &opts.schema {
            if !valid_schema(schema) {
                return Err(Error::InvalidInput(format!(
                    "schema name {schema:?} must be 1-63 characters of a-z, 0-9 and _, not starting with a digit"
                )));
            }
            config.options(format!("-c search_path={schema}"));
        }
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
        let background = tokio::spawn(listen_and_notify(config, wake.clone(), appended_rx));
        Ok(PgStore {
            inner: Arc::new(Inner {
                pool,
                wake,
                appended,
                background,
            }),
        })
    }

    pub(crate) async fn append(
        &self,
        stream: &str,
        expected: ExpectedVersion,
        events: &[EventData],
    ) -> Result<AppendResult> {
        let expected_code: i64 = match expected {
            ExpectedVersion::Any => -1,
            ExpectedVersion::NoStream => -2,
            ExpectedVersion::StreamExists => -3,
            ExpectedVersion::Exact(v) => i64::try_from(v).map_err(|_| {
                Error::InvalidInput(format!("expected version {v} is out of range"))
            })?,
        };
        let ids: Vec<uuid::Uuid> = events.iter().map(|e| e.id).collect();
        let types: Vec<&str> = events.iter().map(|e| e.event_type.as_str()).collect();
        let data: Vec<JsonText<'_>> = events.iter().map(|e| JsonText(e.data.get())).collect();
        let meta: Vec<JsonText<'_>> = events.iter().map(|e| JsonText(e.metadata.get())).collect();
        let client = self.inner.pool.get().await?;
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
                    &[&stream, &expected_code, &ids, &types, &data, &meta],
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
        let status: i32 = row.try_get(0)?;
        let n = events.len() as u64;
        match status {
            0 | 1 => {
                let first_version: i64 = row.try_get(2)?;
                let first_position: i64 = row.try_get(3)?;
                let (fv, fp) = (first_version as u64, first_position as u64);
                if status == 0 {
                    self.inner.wake.send_modify(|v| *v = v.wrapping_add(1));
                    self.inner.appended.send_modify(|v| *v = v.wrapping_add(1));
                }
                Ok(AppendResult {
                    first_version: fv,
                    last_version: fv + n - 1,
                    first_position: fp,
                    last_position: fp + n - 1,
                })
            }
            2 => {
                let actual: Option<i64> = row.try_get(1)?;
                Err(Error::WrongExpectedVersion {
                    expected,
                    actual: actual.map(|v| v as u64),
                })
            }
            3 => Err(Error::DuplicateEventId(events[0].id)),
            other => Err(Error::Corrupt(format!(
                "galleon_append returned unknown status {other}"
            ))),
        }
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
        let from = from_version.min(i64::MAX as u64) as i64;
        let rows = self
            .query_with_retry(sql, &[&stream, &from, &(max as i64)])
            .await?;
        if rows.is_empty() {
            let exists = self
                .query_with_retry("SELECT 1 FROM streams WHERE stream_id = $1", &[&stream])
                .await?;
            if exists.is_empty() {
                return Err(Error::StreamNotFound(stream.to_owned()));
            }
        }
        rows.iter().map(|r| row_to_event(r, Some(stream))).collect()
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
        data: Json::trusted(row.try_get(5)?),
        metadata: Json::trusted(row.try_get(6)?),
    })
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
        for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sql_uses_the_position_shift() {
        let shift = format!("<< {POSITION_SHIFT}");
        assert!(MIGRATIONS[0].contains(&shift));
        let per_txn = format!("{}", 1u64 << POSITION_SHIFT);
        assert_eq!(MIGRATIONS[0].matches(&per_txn).count(), 3);
        assert!(SQL_READ_ALL.contains(&shift));
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
