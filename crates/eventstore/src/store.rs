//! [`Store`]: the one API over both backends; subscriptions go through its fan-out.
//!
//! `Store::open` and `Store::open_with` (`OpenOptions`) take `sqlite:PATH` or `postgres://...` and
//! migrate the schema on open; a `Store` is the backend (an enum over both), the handle's fan-out
//! (`fanout.rs`) and its counters, cheap to clone. Here too: `read_filtered`, `subscribe_all`,
//! `subscribe`, `subscribe_frames`, `head_position`, `stats`.

#[cfg(feature = "sqlite")]
use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::fanout::{
    DEFAULT_SUBSCRIBER_BUFFER, FanoutStats, FrameFormat, Hub, MAX_SUBSCRIBER_BUFFER, Source,
};
use crate::filter::EventFilter;
#[cfg(feature = "postgres")]
use crate::postgres::{PgOptions, PgStore};
#[cfg(feature = "sqlite")]
use crate::sqlite::SqliteStore;
use crate::stats::{AppendCounters, StoreStats};
use crate::subscription::{FrameSubscription, Subscription};
use crate::types::{
    AppendResult, Direction, EventData, ExpectedVersion, MAX_READ_EVENTS, RecordedEvent,
    validate_events, validate_stream_id,
};

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
    /// Batches of the live feed kept for subscribers that are behind (default
    /// [`crate::DEFAULT_SUBSCRIBER_BUFFER`], 1 to [`crate::MAX_SUBSCRIBER_BUFFER`]); one further
    /// behind reads the store itself until it has caught up.
    pub subscriber_buffer: Option<usize>,
    /// Most events the live feed's one reader takes per query when it is behind (default
    /// [`crate::TAIL_BATCH_MAX`], [`crate::SUBSCRIPTION_BATCH`] to [`crate::MAX_READ_EVENTS`]):
    /// it doubles its reads from `SUBSCRIPTION_BATCH` up to this. A batch's memory, times
    /// `subscriber_buffer`, bounds what the live feed holds.
    pub tail_batch_max: Option<usize>,
    /// SQLite only: threads running the reads, a pool of their own beside tokio's blocking pool
    /// (default [`crate::DEFAULT_SQLITE_READER_THREADS`], 1 to
    /// [`crate::MAX_SQLITE_READER_THREADS`]). WAL readers run concurrently, one connection each.
    pub sqlite_reader_threads: Option<usize>,
    /// Most persistent subscriptions (consumer groups included) the store holds (default
    /// [`crate::DEFAULT_MAX_SUBSCRIPTIONS`], at least 1): creating one more is
    /// [`Error::TooManySubscriptions`]. Subscriptions already stored past a lowered limit stay
    /// and work. On PostgreSQL, creations running at the same moment may pass it by their number.
    pub max_subscriptions: Option<usize>,
    /// PostgreSQL only: a transaction open this long while committed events wait behind it
    /// (`$all` is read below the cluster's oldest running transaction) is logged as a warning,
    /// with its `pid` and database, and shown in [`StoreStats::all_held_back_by`] (default
    /// [`crate::DEFAULT_HELD_BACK_WARNING`], 5 s).
    pub held_back_warning: Option<std::time::Duration>,
}

/// Default [`OpenOptions::held_back_warning`]: far above any append's transaction (milliseconds),
/// well below what an operator would notice as "the feed stopped".
pub const DEFAULT_HELD_BACK_WARNING: std::time::Duration = std::time::Duration::from_secs(5);

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
    /// The one `$all` reader of this handle (and its clones) and its live subscribers.
    hub: Arc<Hub>,
    /// Appends, conflicts and group heartbeats, for [`Store::stats`].
    counters: Arc<AppendCounters>,
    /// [`OpenOptions::max_subscriptions`].
    pub(crate) max_subscriptions: usize,
    /// The consumer groups with members in this handle, each heartbeating for all of them.
    beaters: Arc<crate::group_beater::Beaters>,
}

#[derive(Debug, Clone)]
pub(crate) enum Backend {
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
        let buffer = options
            .subscriber_buffer
            .unwrap_or(DEFAULT_SUBSCRIBER_BUFFER);
        if !(1..=MAX_SUBSCRIBER_BUFFER).contains(&buffer) {
            return Err(Error::InvalidInput(format!(
                "subscriber buffer {buffer}: expected 1 to {MAX_SUBSCRIBER_BUFFER} batches"
            )));
        }
        let tail_max = options.tail_batch_max.unwrap_or(crate::TAIL_BATCH_MAX);
        if !(crate::SUBSCRIPTION_BATCH..=crate::MAX_READ_EVENTS).contains(&tail_max) {
            return Err(Error::InvalidInput(format!(
                "tail batch {tail_max}: expected {} to {} events",
                crate::SUBSCRIPTION_BATCH,
                crate::MAX_READ_EVENTS
            )));
        }
        let max_subscriptions = options
            .max_subscriptions
            .unwrap_or(crate::DEFAULT_MAX_SUBSCRIPTIONS);
        if max_subscriptions == 0 {
            return Err(Error::InvalidInput(
                "max subscriptions 0: expected at least 1".to_owned(),
            ));
        }
        let backend = Store::open_backend(url, options).await?;
        let hub = Arc::new(Hub::new(Arc::new(backend.clone()), buffer, tail_max));
        Ok(Store {
            backend,
            hub,
            counters: Arc::default(),
            max_subscriptions,
            beaters: Arc::default(),
        })
    }

    async fn open_backend(url: &str, options: OpenOptions) -> Result<Backend> {
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
                Ok(Backend::Sqlite(
                    SqliteStore::open(PathBuf::from(path), options.sqlite_reader_threads).await?,
                ))
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
                    held_back_warning: options.held_back_warning,
                };
                Ok(Backend::Postgres(PgStore::open(url, opts).await?))
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

    /// [`Store::append`] without the soft-delete rule (`stream_meta.rs`): validated, counted.
    pub(crate) async fn append_raw(
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

    /// Counts an append's outcome in [`Store::stats`].
    pub(crate) fn note_append(&self, outcome: &Result<AppendResult>) {
        self.counters.note(outcome);
    }

    /// [`Store::read_stream`] without the stream's metadata (`stream_meta.rs`).
    pub(crate) async fn read_stream_raw(
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

    /// Reads up to `max` events of `$all` (clamped to [`crate::MAX_READ_EVENTS`]) with
    /// position `>= from_position` that pass `filter` (a category, event types), in
    /// increasing position; to continue, pass the last one's position + 1. Both backends keep
    /// an index per category and per type, so a read costs the events it returns, not the
    /// events it skips. Like [`Store::read_all`], a later call never returns an event
    /// positioned before one an earlier call returned.
    pub async fn read_filtered(
        &self,
        from_position: u64,
        max: usize,
        filter: &EventFilter,
    ) -> Result<Vec<RecordedEvent>> {
        self.backend
            .read(from_position, max.min(MAX_READ_EVENTS), filter)
            .await
    }

    /// Follows `$all` from `from_position` (inclusive): first the stored events, then each new
    /// one as it is committed, each exactly once, in increasing position. Transient errors (a
    /// dropped connection) are retried inside; the stream ends only after yielding a permanent
    /// error.
    ///
    /// Live events come from one reader of `$all` per store handle (and its clones), fanned out
    /// in memory: a subscriber costs a wake-up per batch of appends, not a query. One that falls
    /// more than [`OpenOptions::subscriber_buffer`] batches behind reads the store itself until
    /// it has caught up, then rejoins.
    pub fn subscribe_all(&self, from_position: u64) -> Subscription {
        self.subscribe(from_position, EventFilter::all())
    }

    /// [`Store::subscribe_all`] for the events that pass `filter` only.
    pub fn subscribe(&self, from_position: u64, filter: EventFilter) -> Subscription {
        Subscription::start(self.hub.clone(), from_position, filter)
    }

    /// [`Store::subscribe`] with each event formatted by `format` (galleon-eventstore-http's `sse_frame` for
    /// server-sent events): live events are formatted once per store handle and the bytes
    /// shared by every such subscriber, instead of once per subscriber.
    pub fn subscribe_frames(
        &self,
        from_position: u64,
        filter: EventFilter,
        format: FrameFormat,
    ) -> FrameSubscription {
        FrameSubscription::start(self.hub.clone(), from_position, filter, format)
    }

    /// A position below which `$all` is final now: start a subscription here to get only
    /// events not yet readable (SQLite: one past the last event; PostgreSQL: the `$all` line,
    /// see DESIGN-NOTES.md).
    pub async fn head_position(&self) -> Result<u64> {
        Source::head(&self.backend).await
    }

    pub(crate) fn backend(&self) -> &Backend {
        &self.backend
    }

    /// Counters of this handle's fan-out of live events.
    pub fn fanout_stats(&self) -> FanoutStats {
        self.hub.stats()
    }

    /// This handle's counters (shared by its clones): appends, events, conflicts, open and live
    /// subscribers, the `$all` watermark and its lag. Cheap: atomics and one short lock, no
    /// query; for a stats page or `/metrics` scraped as often as wanted.
    pub fn stats(&self) -> StoreStats {
        let (appends, events_appended, conflicts) = self.counters.load();
        let (subscribers, all_watermark, all_lag_micros) = self.hub.watermark_stats();
        let held_back: Option<(u32, std::time::Duration)> = match &self.backend {
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.held_back(),
            #[allow(unreachable_patterns)]
            _ => None,
        };
        StoreStats {
            appends,
            events_appended,
            conflicts,
            subscribers,
            live_subscribers: self.hub.stats().live_subscribers,
            all_watermark,
            all_lag_micros,
            all_held_back_by: held_back.map(|(pid, _)| pid),
            all_held_back_micros: held_back.map(|(_, age)| age.as_micros() as u64),
            group_heartbeats: self.counters.group_heartbeats(),
        }
    }

    /// This handle's consumer-group beaters (`group_beater.rs`).
    pub(crate) fn beaters(&self) -> &crate::group_beater::Beaters {
        &self.beaters
    }

    /// Counts one consumer-group heartbeat transaction in [`Store::stats`].
    pub(crate) fn note_group_heartbeat(&self) {
        self.counters.note_group_heartbeat();
    }
}

impl Backend {
    async fn read(
        &self,
        from: u64,
        max: usize,
        filter: &EventFilter,
    ) -> Result<Vec<RecordedEvent>> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.read_filtered(from, max, filter).await,
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.read_filtered(from, max, filter).await,
        }
    }
}

impl Source for Backend {
    fn read<'a>(
        &'a self,
        from: u64,
        max: usize,
        filter: &'a EventFilter,
    ) -> BoxFuture<'a, Result<Vec<RecordedEvent>>> {
        Box::pin(Backend::read(self, from, max, filter))
    }

    fn head(&self) -> BoxFuture<'_, Result<u64>> {
        Box::pin(async move {
            match self {
                #[cfg(feature = "sqlite")]
                Backend::Sqlite(s) => s.head().await,
                #[cfg(feature = "postgres")]
                Backend::Postgres(p) => p.head().await,
            }
        })
    }

    fn wake(&self) -> watch::Receiver<u64> {
        match self {
            #[cfg(feature = "sqlite")]
            Backend::Sqlite(s) => s.wake(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(p) => p.wake(),
        }
    }
}
