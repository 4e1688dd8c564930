//! The embedded backend: one SQLite file in WAL mode, one writer thread with group commit,
//! readers on their own connections and threads. `subscriptions`: persistent subscriptions' rows.
//!
//! The writer commits up to 128 appends per transaction (`MAX_GROUP_COMMIT_CALLS`), each in a
//! SAVEPOINT, with `synchronous=FULL`; reads run on a `galleon-offload` pool of their own (4
//! threads by default, a connection each). Schema versions are `MIGRATIONS`; a newer database is
//! refused.

mod groups;
mod meta;
mod subscriptions;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use galleon_offload::{Config, Kind, OffloadError, Policy, Pool};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::{mpsc, oneshot, watch};
use uuid::Uuid;

use crate::error::{Error, Result};
use crate::filter::EventFilter;
use crate::time::Timestamp;
use crate::types::{AppendResult, Direction, EventData, ExpectedVersion, Json, RecordedEvent};

/// Schema migrations, applied in order; the schema version is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: events and streams.
    "CREATE TABLE events (
        position   INTEGER PRIMARY KEY,
        stream_id  TEXT    NOT NULL,
        version    INTEGER NOT NULL,
        event_id   BLOB    NOT NULL UNIQUE,
        event_type TEXT    NOT NULL,
        data       TEXT    NOT NULL,
        metadata   TEXT    NOT NULL,
        UNIQUE (stream_id, version)
    );
    CREATE TABLE streams (
        stream_id TEXT PRIMARY KEY,
        version   INTEGER NOT NULL
    ) WITHOUT ROWID;",
    // 2: when each event was recorded (microseconds since the Unix epoch; events stored before
    // get the time of this upgrade), and the indexes of reads by category and by type. The
    // category is a virtual column (message-db's rule: the stream id up to its first `-`),
    // computed by the same expression on insert and in the index, stored only in the index.
    "ALTER TABLE events ADD COLUMN recorded_at INTEGER NOT NULL DEFAULT 0;
    UPDATE events SET recorded_at = CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER);
    ALTER TABLE events ADD COLUMN category TEXT GENERATED ALWAYS AS (
        CASE WHEN instr(stream_id, '-') > 0 THEN substr(stream_id, 1, instr(stream_id, '-') - 1)
             ELSE stream_id END) VIRTUAL;
    CREATE INDEX events_category ON events (category, position);
    CREATE INDEX events_type ON events (event_type, position);",
    // 3: persistent subscriptions and their checkpoints (`subscriptions.rs`).
    "CREATE TABLE subscriptions (
        name        TEXT    PRIMARY KEY,
        category    TEXT,
        event_types TEXT    NOT NULL,
        checkpoint  INTEGER NOT NULL,
        created_at  INTEGER NOT NULL
    ) WITHOUT ROWID;",
    // 4: consumer groups (`groups.rs`): a group's settings on its subscription row (`NULL` for a
    // plain subscription), a checkpoint and an owner per partition, a row per live member.
    "ALTER TABLE subscriptions ADD COLUMN partitions INTEGER;
    ALTER TABLE subscriptions ADD COLUMN member_timeout_ms INTEGER;
    CREATE TABLE subscription_partitions (
        name       TEXT    NOT NULL,
        partition  INTEGER NOT NULL,
        checkpoint INTEGER NOT NULL,
        owner      TEXT,
        PRIMARY KEY (name, partition)
    ) WITHOUT ROWID;
    CREATE TABLE subscription_members (
        name       TEXT    NOT NULL,
        member     TEXT    NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (name, member)
    ) WITHOUT ROWID;",
    // 5: stream metadata (`meta.rs`, applied by `crate::stream_meta` on stream reads).
    "CREATE TABLE stream_meta (
        stream_id       TEXT    PRIMARY KEY,
        max_count       INTEGER,
        max_age_ms      INTEGER,
        truncate_before INTEGER,
        deleted         INTEGER NOT NULL DEFAULT 0
    ) WITHOUT ROWID;",
];

/// How long a connection waits on a lock held by another connection (another process writing
/// the same file, a checkpoint) before failing with `SQLITE_BUSY`. A guess: long enough for any
/// group commit of this crate, short enough that a stuck peer shows up as an error.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Most append calls the writer commits in one transaction. Bench `append 100 writers` with
/// 100 calls of 100 events: one group holds them all, so a larger value buys nothing there, and
/// it bounds the latency a single call can add to the others of its group.
const MAX_GROUP_COMMIT_CALLS: usize = 128;

/// Capacity of the queue in front of the writer thread; callers beyond it wait (backpressure).
/// Twice [`MAX_GROUP_COMMIT_CALLS`] so the next group is queued while one commits.
const WRITE_QUEUE_CAPACITY: usize = 2 * MAX_GROUP_COMMIT_CALLS;

/// Reader threads by default ([`crate::OpenOptions::sqlite_reader_threads`]). WAL readers run
/// concurrently; 4 matches the 2-4 cores of the machines galleon is benchmarked on.
pub const DEFAULT_SQLITE_READER_THREADS: usize = 4;

/// Most reader threads accepted: each keeps a connection with up to 8 MiB of page cache.
pub const MAX_SQLITE_READER_THREADS: usize = 256;

/// Reads queued for the reader threads at most; further callers wait (without a thread) for room.
const READ_QUEUE_CAPACITY: usize = 1024;

/// Reader threads are named `galleon-sqlite-read-{i}`.
const READER_THREAD_NAME: &str = "galleon-sqlite-read";

/// Page-cache size per connection in KiB (negative `cache_size` means KiB in SQLite). A guess:
/// 8 MiB holds the index pages of some million events.
const CACHE_SIZE_KIB: i64 = 8 * 1024;

struct WriteRequest {
    stream: String,
    expected: ExpectedVersion,
    events: Vec<EventData>,
    reply: oneshot::Sender<Result<AppendResult>>,
}

/// The SQLite backend. Cloning shares the writer thread and the reader connections.
#[derive(Clone)]
pub(crate) struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    writer: mpsc::Sender<WriteRequest>,
    readers: Arc<Readers>,
    /// The reader threads; shut down (queued reads cancelled, threads exiting after their current
    /// read) when the last clone of the store goes. Reads hold `readers`, never the pool.
    pool: Pool,
    read_kind: Kind,
    /// Position of the last committed event (0: none). Subscribers wait on it.
    head: watch::Sender<u64>,
}

/// The reader connections, shared with the reads running on the reader threads.
struct Readers {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// Idle connections kept: one per reader thread, so no read opens its own.
    max_idle: usize,
}

impl Readers {
    /// Runs `f` on an idle connection (or a new one), then keeps it for the next read.
    fn with_connection<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match conn {
            Some(c) => c,
            None => open_connection(&self.path)?,
        };
        let out = f(&conn);
        let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
        out
    }
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.readers.path)
            .field("reader_threads", &self.inner.pool.threads())
            .finish_non_exhaustive()
    }
}

/// The reader threads option checked, `None` giving the default.
fn check_reader_threads(option: Option<usize>) -> Result<usize> {
    let n = option.unwrap_or(DEFAULT_SQLITE_READER_THREADS);
    if !(1..=MAX_SQLITE_READER_THREADS).contains(&n) {
        return Err(Error::InvalidInput(format!(
            "sqlite reader threads {n}: expected 1 to {MAX_SQLITE_READER_THREADS}"
        )));
    }
    Ok(n)
}

/// What a job on the reader threads that gave no result is for its caller.
fn reader_error(e: OffloadError) -> Error {
    match e {
        OffloadError::ShutDown => Error::Closed,
        OffloadError::Panicked(message) => Error::Panicked(message),
        // Only `try_run` reports a full queue; `run` waits for room.
        e @ OffloadError::QueueFull => Error::Backend {
            backend: "sqlite",
            message: e.to_string(),
            transient: true,
            source: Box::new(e),
        },
    }
}

fn open_connection(path: &Path) -> Result<Connection> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // WAL: readers never block the writer; synchronous=FULL: a commit is on disk when `append`
    // returns (group commit pays one fsync per group, not per call).
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.pragma_update(None, "cache_size", -CACHE_SIZE_KIB)?;
    Ok(conn)
}

fn migrate(conn: &mut Connection) -> Result<()> {
    migrate_to(conn, MIGRATIONS.len())
}

/// [`migrate`] up to schema version `target` (tests build older schemas with it).
fn migrate_to(conn: &mut Connection, target: usize) -> Result<()> {
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_version (
            version    INTEGER PRIMARY KEY,
            applied_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
        )",
    )?;
    let current: i64 = tx.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM schema_version",
        [],
        |r| r.get(0),
    )?;
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
        tx.execute_batch(sql)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES (?1)",
            [i as i64 + 1],
        )?;
    }
    tx.commit()?;
    Ok(())
}

impl SqliteStore {
    /// Opens (creating file and parent directories when missing) and migrates the database,
    /// on the reader threads it starts (`reader_threads`: `None` for the default).
    pub(crate) async fn open(path: PathBuf, reader_threads: Option<usize>) -> Result<Self> {
        let threads = check_reader_threads(reader_threads)?;
        let pool = Pool::new(Config {
            threads,
            queue_capacity: READ_QUEUE_CAPACITY,
            policy: Policy::Offload,
            thread_name: READER_THREAD_NAME.into(),
            ..Config::default()
        })?;
        let read_kind = pool.kind("sqlite-read");
        let opened = pool.run(&read_kind, None, {
            let path = path.clone();
            move || -> Result<(Connection, u64)> {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)?;
                }
                let mut conn = open_connection(&path)?;
                migrate(&mut conn)?;
                let head: i64 =
                    conn.query_row("SELECT COALESCE(MAX(position), 0) FROM events", [], |r| {
                        r.get(0)
                    })?;
                Ok((conn, head as u64))
            }
        });
        let (conn, head) = opened.await.map_err(reader_error)??;
        let (tx, rx) = mpsc::channel(WRITE_QUEUE_CAPACITY);
        let (head, _) = watch::channel(head);
        let inner = Arc::new(Inner {
            writer: tx,
            readers: Arc::new(Readers {
                path,
                idle: Mutex::new(Vec::with_capacity(threads)),
                max_idle: threads,
            }),
            pool,
            read_kind,
            head,
        });
        let head_tx = inner.head.clone();
        std::thread::Builder::new()
            .name("galleon-sqlite-writer".into())
            .spawn(move || writer_loop(conn, rx, head_tx))?;
        Ok(SqliteStore { inner })
    }

    pub(crate) async fn append(
        &self,
        stream: &str,
        expected: ExpectedVersion,
        events: Vec<EventData>,
    ) -> Result<AppendResult> {
        let (reply, rx) = oneshot::channel();
        let req = WriteRequest {
            stream: stream.to_owned(),
            expected,
            events,
            reply,
        };
        self.inner
            .writer
            .send(req)
            .await
            .map_err(|_| Error::Closed)?;
        rx.await.map_err(|_| Error::Closed)?
    }

    /// Runs `f` on a reader connection on a reader thread (waiting for one when all are busy).
    /// A panic in `f` is [`Error::Panicked`] for this caller only.
    async fn with_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let readers = self.inner.readers.clone();
        self.inner
            .pool
            .run(&self.inner.read_kind, None, move || {
                readers.with_connection(f)
            })
            .await
            .map_err(reader_error)?
    }

    pub(crate) async fn read_stream(
        &self,
        stream: &str,
        from_version: u64,
        max: usize,
        direction: Direction,
    ) -> Result<Vec<RecordedEvent>> {
        let stream = stream.to_owned();
        self.with_reader(move |conn| {
            let from = from_version.min(i64::MAX as u64) as i64;
            let sql = match direction {
                Direction::Forward => SQL_READ_FORWARD,
                Direction::Backward => SQL_READ_BACKWARD,
            };
            let mut stmt = conn.prepare_cached(sql)?;
            let rows = stmt.query_map(params![stream, from, max as i64], row_to_event)?;
            let events = rows.collect::<rusqlite::Result<Vec<_>>>()?;
            if events.is_empty() {
                let exists = conn
                    .prepare_cached("SELECT 1 FROM streams WHERE stream_id = ?1")?
                    .query_row([&stream], |_| Ok(()))
                    .optional()?
                    .is_some();
                if !exists {
                    return Err(Error::StreamNotFound(stream));
                }
            }
            Ok(events)
        })
        .await
    }

    pub(crate) async fn read_all(
        &self,
        from_position: u64,
        max: usize,
    ) -> Result<Vec<RecordedEvent>> {
        self.with_reader(move |conn| {
            let from = from_position.min(i64::MAX as u64) as i64;
            let mut stmt = conn.prepare_cached(SQL_READ_ALL)?;
            let rows = stmt.query_map(params![from, max as i64], row_to_event)?;
            Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
        })
        .await
    }

    /// `$all` from `from_position` on that passes `filter`, at most `max`: by the category
    /// index, or one type index range per event type, merged.
    pub(crate) async fn read_filtered(
        &self,
        from_position: u64,
        max: usize,
        filter: &EventFilter,
    ) -> Result<Vec<RecordedEvent>> {
        if filter.is_all() {
            return self.read_all(from_position, max).await;
        }
        let filter = filter.clone();
        self.with_reader(move |conn| {
            let from = from_position.min(i64::MAX as u64) as i64;
            let limit = max as i64;
            let types = filter.event_types();
            if let Some(category) = filter.category_name() {
                return if types.is_empty() {
                    let mut stmt = conn.prepare_cached(SQL_READ_CATEGORY)?;
                    let rows = stmt.query_map(params![from, limit, category], row_to_event)?;
                    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
                } else {
                    let types = serde_json::to_string(types).map_err(|e| {
                        Error::InvalidInput(format!("event types not encodable: {e}"))
                    })?;
                    let mut stmt = conn.prepare_cached(SQL_READ_CATEGORY_TYPES)?;
                    let rows =
                        stmt.query_map(params![from, limit, category, types], row_to_event)?;
                    Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
                };
            }
            // One ordered index range per type, merged: an `IN` over the index's first column
            // would collect every match before sorting.
            let mut stmt = conn.prepare_cached(SQL_READ_TYPE)?;
            let mut events = Vec::new();
            for t in types {
                let rows = stmt.query_map(params![from, limit, t], row_to_event)?;
                events.extend(rows.collect::<rusqlite::Result<Vec<_>>>()?);
            }
            events.sort_unstable_by_key(|e| e.position);
            events.truncate(max);
            Ok(events)
        })
        .await
    }

    /// One past the last stored position: everything below it is final (one writer, positions
    /// are rowids in commit order).
    pub(crate) async fn head(&self) -> Result<u64> {
        self.with_reader(|conn| {
            let head: i64 = conn.query_row(
                "SELECT COALESCE(MAX(position), 0) + 1 FROM events",
                [],
                |r| r.get(0),
            )?;
            Ok(head as u64)
        })
        .await
    }

    /// A receiver that changes after every commit.
    pub(crate) fn wake(&self) -> watch::Receiver<u64> {
        self.inner.head.subscribe()
    }
}

const SQL_READ_ALL: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE position >= ?1 ORDER BY position LIMIT ?2";

const SQL_READ_FORWARD: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE stream_id = ?1 AND version >= ?2 ORDER BY version LIMIT ?3";

const SQL_READ_BACKWARD: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE stream_id = ?1 AND version <= ?2 ORDER BY version DESC LIMIT ?3";

/// ?1 from, ?2 limit, ?3 category: one range of `events_category`.
const SQL_READ_CATEGORY: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE category = ?3 AND position >= ?1 ORDER BY position LIMIT ?2";

/// As [`SQL_READ_CATEGORY`], keeping the types of the JSON array ?4.
const SQL_READ_CATEGORY_TYPES: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events INDEXED BY events_category \
     WHERE category = ?3 AND position >= ?1 AND event_type IN (SELECT value FROM json_each(?4)) \
     ORDER BY position LIMIT ?2";

/// ?1 from, ?2 limit, ?3 one event type: one range of `events_type`.
const SQL_READ_TYPE: &str = "SELECT position, stream_id, version, event_id, event_type, data, metadata, recorded_at \
     FROM events WHERE event_type = ?3 AND position >= ?1 ORDER BY position LIMIT ?2";

/// Decodes one row of `position, stream_id, version, event_id, event_type, data, metadata,
/// recorded_at`.
/// JSON columns are trusted: only checked [`Json`] text is ever written to them.
fn row_to_event(row: &rusqlite::Row<'_>) -> rusqlite::Result<RecordedEvent> {
    let position: i64 = row.get(0)?;
    let version: i64 = row.get(2)?;
    let id: [u8; 16] = row.get(3)?;
    Ok(RecordedEvent {
        id: Uuid::from_bytes(id),
        stream_id: row.get(1)?,
        version: version as u64,
        position: position as u64,
        event_type: row.get(4)?,
        data: Json::trusted(row.get(5)?),
        metadata: Json::trusted(row.get(6)?),
        recorded_at: Timestamp::from_micros(row.get(7)?),
    })
}

/// The writer thread: takes a group of queued appends, runs each in a savepoint of one
/// transaction, commits once, then answers every caller and announces the new head.
fn writer_loop(
    mut conn: Connection,
    mut rx: mpsc::Receiver<WriteRequest>,
    head: watch::Sender<u64>,
) {
    let mut group: Vec<WriteRequest> = Vec::with_capacity(MAX_GROUP_COMMIT_CALLS);
    while let Some(first) = rx.blocking_recv() {
        group.push(first);
        while group.len() < MAX_GROUP_COMMIT_CALLS {
            match rx.try_recv() {
                Ok(r) => group.push(r),
                Err(_) => break,
            }
        }
        let mut results: Vec<Result<AppendResult>> = Vec::with_capacity(group.len());
        let recorded_at = Timestamp::now().as_micros();
        let outcome = (|| -> rusqlite::Result<()> {
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
            for req in &group {
                results.push(append_in_savepoint(&tx, req, recorded_at));
            }
            tx.commit()
        })();
        match outcome {
            Ok(()) => {
                let last = results
                    .iter()
                    .filter_map(|r| r.as_ref().ok())
                    .map(|r| r.last_position)
                    .max();
                if let Some(last) = last {
                    head.send_if_modified(|h| {
                        let changed = last > *h;
                        *h = (*h).max(last);
                        changed
                    });
                }
                for (req, res) in group.drain(..).zip(results) {
                    let _ = req.reply.send(res);
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "sqlite group commit failed; {} appends rejected", group.len());
                for req in group.drain(..) {
                    let _ = req.reply.send(Err(clone_sqlite_error(&e)));
                }
            }
        }
    }
}

fn clone_sqlite_error(e: &rusqlite::Error) -> Error {
    match e {
        rusqlite::Error::SqliteFailure(code, msg) => {
            Error::from(rusqlite::Error::SqliteFailure(*code, msg.clone()))
        }
        other => Error::from(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ERROR),
            Some(other.to_string()),
        )),
    }
}

fn append_in_savepoint(
    tx: &rusqlite::Transaction<'_>,
    req: &WriteRequest,
    recorded_at: i64,
) -> Result<AppendResult> {
    tx.execute_batch("SAVEPOINT append")?;
    let res = append_one(tx, req, recorded_at);
    match &res {
        Ok(_) => tx.execute_batch("RELEASE append")?,
        Err(_) => tx.execute_batch("ROLLBACK TO append; RELEASE append")?,
    }
    res
}

fn append_one(
    tx: &rusqlite::Transaction<'_>,
    req: &WriteRequest,
    recorded_at: i64,
) -> Result<AppendResult> {
    let n = req.events.len() as u64;
    // Idempotent retry: the first id is already stored.
    let mut by_id =
        tx.prepare_cached("SELECT stream_id, version, position FROM events WHERE event_id = ?1")?;
    let first: Option<(String, i64, i64)> = by_id
        .query_row([req.events[0].id.as_bytes()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .optional()?;
    if let Some((stream, v0, p0)) = first {
        for (i, e) in req.events.iter().enumerate() {
            let found: Option<(String, i64, i64)> = by_id
                .query_row([e.id.as_bytes()], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .optional()?;
            let i = i as i64;
            if found != Some((req.stream.clone(), v0 + i, p0 + i)) || stream != req.stream {
                return Err(Error::DuplicateEventId(e.id));
            }
        }
        // A replay counts as one only under the expectation the original append met
        // (EventStoreDB's rule); otherwise it is the conflict it would have been.
        if !req.expected.accepts((v0 as u64).checked_sub(1)) {
            let actual: Option<i64> = tx
                .prepare_cached("SELECT version FROM streams WHERE stream_id = ?1")?
                .query_row([&req.stream], |r| r.get(0))
                .optional()?;
            return Err(Error::WrongExpectedVersion {
                expected: req.expected,
                actual: actual.map(|v| v as u64),
            });
        }
        return Ok(AppendResult {
            first_version: v0 as u64,
            last_version: (v0 as u64) + n - 1,
            first_position: p0 as u64,
            last_position: (p0 as u64) + n - 1,
        });
    }
    let actual: Option<i64> = tx
        .prepare_cached("SELECT version FROM streams WHERE stream_id = ?1")?
        .query_row([&req.stream], |r| r.get(0))
        .optional()?;
    let actual = actual.map(|v| v as u64);
    if !req.expected.accepts(actual) {
        return Err(Error::WrongExpectedVersion {
            expected: req.expected,
            actual,
        });
    }
    let first_version = actual.map_or(0, |v| v + 1);
    let mut insert = tx.prepare_cached(
        "INSERT INTO events (stream_id, version, event_id, event_type, data, metadata, recorded_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?;
    let mut first_position = 0;
    for (i, e) in req.events.iter().enumerate() {
        let version = (first_version + i as u64) as i64;
        let r = insert.execute(params![
            req.stream,
            version,
            e.id.as_bytes(),
            e.event_type,
            e.data.get(),
            e.metadata.get(),
            recorded_at
        ]);
        match r {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                return Err(Error::DuplicateEventId(e.id));
            }
            Err(other) => return Err(other.into()),
        }
        if i == 0 {
            first_position = tx.last_insert_rowid() as u64;
        }
    }
    let last_version = first_version + n - 1;
    tx.prepare_cached(
        "INSERT INTO streams (stream_id, version) VALUES (?1, ?2) \
         ON CONFLICT (stream_id) DO UPDATE SET version = excluded.version",
    )?
    .execute(params![req.stream, last_version as i64])?;
    Ok(AppendResult {
        first_version,
        last_version,
        first_position,
        last_position: first_position + n - 1,
    })
}
