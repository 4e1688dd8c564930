//! [`Store`]: the one API over both backends, and [`Subscription`], the `$all` follower.

use std::collections::VecDeque;
#[cfg(feature = "sqlite")]
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::Stream;
use tokio::sync::watch;

use crate::error::{Error, Result};
#[cfg(feature = "postgres")]
use crate::postgres::{PgOptions, PgStore};
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteStore;
use crate::types::{
    AppendResult, Direction, EventData, ExpectedVersion, MAX_READ_EVENTS, RecordedEvent,
    validate_events, validate_stream_id,
};

/// Events a subscription reads from storage per query while catching up. A guess: large enough
/// that catching up costs one query per ~100 KB, small enough to keep a slow consumer's buffer small.
pub const SUBSCRIPTION_BATCH: usize = 500;

/// How often an idle subscription re-reads `$all` even without a wake-up. Wake-ups (in-process
/// after local appends, NOTIFY from other processes) are the fast path; this bounds the delay
/// when one is lost: a dropped LISTEN connection, a write by another process to the same SQLite
/// file, an event held back on PostgreSQL by an unrelated long transaction. One cheap indexed
/// query per second per subscriber.
pub const SUBSCRIPTION_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// First wait of a subscription after a transient read error; doubled per failure up to
/// [`SUBSCRIPTION_RETRY_MAX`].
const SUBSCRIPTION_RETRY_MIN: Duration = Duration::from_millis(50);
/// Longest wait of a subscription between retries of a failing read.
const SUBSCRIPTION_RETRY_MAX: Duration = Duration::from_secs(5);

/// Options of [`Store::open_with`]; [`Store::open`] uses the defaults.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// PostgreSQL only: the schema holding the tables (created if missing). Default: the
    /// connection's `search_path` (normally `public`). Tests use one schema per run.
    pub pg_schema: Option<String>,
    /// PostgreSQL only: connections in the pool (default [`crate::DEFAULT_POOL_SIZE`]).
    pub pg_pool_size: Option<usize>,
    /// PostgreSQL only: `application_name` of the store's connections (visible in `pg_stat_activity`).
    pub pg_application_name: Option<String>,
}

/// An event store: append to streams, read streams and `$all`, follow `$all` live.
///
/// Cheap to clone; clones share the connections. Dropping the last clone closes the store.
///
/// # Examples
/// ```
/// use galleon_eventstore::{Direction, EventData, ExpectedVersion, Store};
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let store = Store::open(&format!("sqlite:{}", dir.path().join("events.db").display()))
///     .await
///     .unwrap();
/// let event = EventData::json("Placed", &serde_json::json!({"total": 30})).unwrap();
/// store.append("order-1", ExpectedVersion::NoStream, vec![event]).await.unwrap();
/// let read = store.read_stream("order-1", 0, 10, Direction::Forward).await.unwrap();
/// assert_eq!(read[0].version, 0);
/// # });
/// ```
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend,
}

#[derive(Debug, Clone)]
enum Backend {
    #[cfg(feature = "sqlite")]
    Sqlite(SqliteStore),
    #[cfg(feature = "postgres")]
    Postgres(PgStore),
}

impl Store {
    /// Opens the store at `url`, creating and migrating the schema:
    /// `sqlite:PATH` (file and parent directories created when missing) or
    /// `postgres://user@host:port/db` (also `postgresql://`).
    pub async fn open(url: &str) -> Result<Store> {
        Store::open_with(url, OpenOptions::default()).await
    }

    /// [`Store::open`] with options.
    pub async fn open_with(url: &str, options: OpenOptions) -> Result<Store> {
        let bad = |reason: &str| Error::InvalidUrl {
            url: url.to_owned(),
            reason: reason.to_owned(),
        };
        if let Some(rest) = url.strip_prefix("sqlite:") {
            #[cfg(not(feature = "sqlite"))]
            {
                let _ = rest;
                Err(bad(
                    "this build has no SQLite backend (cargo feature `sqlite`)",
                ))
            }
            #[cfg(feature = "sqlite")]
            {
                let path = rest.strip_prefix("//").unwrap_or(rest);
                if path.is_empty() {
                    return Err(bad("the path after `sqlite:` is empty"));
                }
                if path == ":memory:" {
                    return Err(bad(
                        "in-memory SQLite is not supported: readers use their own connections",
                    ));
                }
                let backend = Backend::Sqlite(SqliteStore::open(PathBuf::from(path)).await?);
                Ok(Store { backend })
            }
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            #[cfg(not(feature = "postgres"))]
            {
                let _ = options;
                Err(bad(
                    "this build has no PostgreSQL backend (cargo feature `postgres`)",
                ))
            }
            #[cfg(feature = "postgres")]
            {
                let opts = PgOptions {
                    schema: options.pg_schema,
                    pool_size: options.pg_pool_size,
                    application_name: options.pg_application_name,
                };
                Ok(Store {
                    backend: Backend::Postgres(PgStore::open(url, opts).await?),
                })
            }
        } else {
            Err(bad("expected `sqlite:PATH` or `postgres://...`"))
        }
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        match self.backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(_) => "sqlite",
            #[cfg(feature = "postgres")]
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Appends `events` to `stream` atomically if the stream satisfies `expected`.
    ///
    /// Errors: [`Error::WrongExpectedVersion`] (nothing stored), [`Error::DuplicateEventId`]
    /// when an id is already stored elsewhere, [`Error::InvalidInput`] for a bad stream id, no
    /// events, more than [`crate::MAX_APPEND_EVENTS`], a bad type or an id given twice.
    /// When every id is already stored in this stream, in this order, the call is a retry of an
    /// earlier append: it returns that append's result and stores nothing, provided `expected`
    /// accepts the stream as the original found it (`Any`; `NoStream` for an append that
    /// created the stream; `Exact(v)` for one that followed version `v`...); otherwise it is
    /// the [`Error::WrongExpectedVersion`] it would have been, as EventStoreDB answers. So after
    /// a transient error ([`Error::is_transient`]: a dropped connection, where the append may
    /// or may not have committed), retrying the same call is always safe.
    pub async fn append(
        &self,
        stream: &str,
        expected: ExpectedVersion,
        events: Vec<EventData>,
    ) -> Result<AppendResult> {
        validate_stream_id(stream)?;
        validate_events(&events)?;
        match &self.backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.append(stream, expected, events).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.append(stream, expected, events).await,
        }
    }

    /// Reads up to `max` events of `stream` (clamped to [`crate::MAX_READ_EVENTS`]) starting
    /// at version `from_version`, forward (increasing versions) or backward (use `u64::MAX`
    /// to start at the end). [`Error::StreamNotFound`] when the stream has no events.
    pub async fn read_stream(
        &self,
        stream: &str,
        from_version: u64,
        max: usize,
        direction: Direction,
    ) -> Result<Vec<RecordedEvent>> {
        validate_stream_id(stream)?;
        let max = max.min(MAX_READ_EVENTS);
        match &self.backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.read_stream(stream, from_version, max, direction).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.read_stream(stream, from_version, max, direction).await,
        }
    }

    /// Reads up to `max` events of `$all` (clamped to [`crate::MAX_READ_EVENTS`]) with
    /// position `>= from_position`, in increasing position. To continue after an event, pass
    /// its position + 1. A later call never returns an event positioned before one an
    /// earlier call returned.
    pub async fn read_all(&self, from_position: u64, max: usize) -> Result<Vec<RecordedEvent>> {
        let max = max.min(MAX_READ_EVENTS);
        match &self.backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.read_all(from_position, max).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.read_all(from_position, max).await,
        }
    }

    /// Follows `$all` from `from_position` (inclusive): first the stored events, then each new
    /// one as it is committed, each exactly once, in increasing position. Transient errors (a
    /// dropped connection) are retried inside; the stream ends only after yielding a permanent
    /// error.
    pub fn subscribe_all(&self, from_position: u64) -> Subscription {
        let state = SubState {
            store: self.clone(),
            next: from_position,
            buffer: VecDeque::new(),
            wake: self.wake(),
            failed: false,
        };
        Subscription {
            inner: Box::pin(futures::stream::unfold(state, SubState::step)),
        }
    }

    fn wake(&self) -> watch::Receiver<u64> {
        match &self.backend {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.wake(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.wake(),
        }
    }
}

/// A live stream of `$all` events, from [`Store::subscribe_all`].
#[must_use = "a subscription does nothing unless polled"]
pub struct Subscription {
    inner: Pin<Box<dyn Stream<Item = Result<RecordedEvent>> + Send>>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").finish_non_exhaustive()
    }
}

impl Stream for Subscription {
    type Item = Result<RecordedEvent>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

struct SubState {
    store: Store,
    /// Position of the next event to deliver (one past the last delivered).
    next: u64,
    buffer: VecDeque<RecordedEvent>,
    wake: watch::Receiver<u64>,
    failed: bool,
}

impl SubState {
    async fn step(mut self) -> Option<(Result<RecordedEvent>, SubState)> {
        if self.failed {
            return None;
        }
        let mut retry = SUBSCRIPTION_RETRY_MIN;
        loop {
            if let Some(event) = self.buffer.pop_front() {
                self.next = event.position + 1;
                return Some((Ok(event), self));
            }
            // Mark the wake-up seen *before* reading, so an append that commits after the read
            // started still wakes the wait below.
            self.wake.borrow_and_update();
            match self.store.read_all(self.next, SUBSCRIPTION_BATCH).await {
                Ok(events) if !events.is_empty() => {
                    retry = SUBSCRIPTION_RETRY_MIN;
                    self.buffer.extend(events);
                }
                Ok(_) => {
                    retry = SUBSCRIPTION_RETRY_MIN;
                    tokio::select! {
                        _ = self.wake.changed() => {}
                        _ = tokio::time::sleep(SUBSCRIPTION_POLL_INTERVAL) => {}
                    }
                }
                Err(e) if e.is_transient() => {
                    tracing::warn!(error = %e, retry_in = ?retry, "subscription read failed; retrying");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(SUBSCRIPTION_RETRY_MAX);
                }
                Err(e) => {
                    self.failed = true;
                    return Some((Err(e), self));
                }
            }
        }
    }
}
