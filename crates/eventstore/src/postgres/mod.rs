//! The PostgreSQL backend: a deadpool of tokio-postgres connections, appends group-committed by
//! writer tasks (one server-side check per batch, one COPY of its events, one commit), `$all`
//! read below the oldest running transaction.
//!
//! - `schema`: migrations (`migrations/*.sql`) and schema names.
//! - `writer`: the batching writer tasks and the routing of appends to them.
//! - `read`: stream and `$all` reads.
//! - `notify`: LISTEN/NOTIFY and the WAL nudge, on connections of their own.
//! - `held_back`: who holds `$all` back (a transaction left open), logged and in the stats.
//! - `subscriptions`: persistent subscriptions' rows and checkpoints; `groups`: consumer groups'
//!   partitions and members; `meta`: stream metadata.

mod groups;
mod held_back;
mod meta;
mod notify;
mod read;
mod schema;
mod subscriptions;
mod tls;
mod writer;

use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio::sync::watch;

use crate::error::{Error, Result};
use crate::store::DEFAULT_HELD_BACK_WARNING;
use crate::types::{AppendResult, Direction, EventData, ExpectedVersion, RecordedEvent};
use held_back::HeldBack;
use notify::{listen_and_notify, nudge_wal_writer};
use schema::{migrate, valid_schema};
use writer::{WriterShared, Writers};

/// Connections in the pool unless the caller says otherwise. Tuning runs of the bench
/// (`GALLEON_BENCH_PG_POOL=4/8/16/32`) showed no gain past 4 on 2 cores and no loss up to 16
/// (DESIGN-NOTES.md); 16 leaves room for more cores while staying far below PostgreSQL's
/// default `max_connections` of 100, which other clients share.
pub const DEFAULT_POOL_SIZE: usize = 16;

/// Options of the PostgreSQL backend.
#[derive(Debug, Clone, Default)]
pub(crate) struct PgOptions {
    pub(crate) schema: Option<String>,
    pub(crate) pool_size: Option<usize>,
    pub(crate) application_name: Option<String>,
    pub(crate) held_back_warning: Option<Duration>,
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
    /// The writer tasks and the routing of appends to them.
    writers: Writers,
    background: tokio::task::JoinHandle<()>,
    nudger: tokio::task::JoinHandle<()>,
    /// What the held-back check last found, and its task.
    held_back: Arc<HeldBack>,
    held_back_watch: tokio::task::JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.background.abort();
        self.nudger.abort();
        self.held_back_watch.abort();
    }
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("pool", &self.inner.pool.status())
            .finish_non_exhaustive()
    }
}

impl PgStore {
    pub(crate) async fn open(url: &str, opts: PgOptions) -> Result<Self> {
        let invalid = |reason: String| Error::InvalidUrl {
            url: url.to_owned(),
            reason,
        };
        let split = tls::split(url).map_err(invalid)?;
        let mut config: tokio_postgres::Config = split
            .url
            .parse()
            .map_err(|e: tokio_postgres::Error| invalid(e.to_string()))?;
        config.ssl_mode(tls::ssl_mode(split.mode));
        let tls = tls::connector(&split).map_err(invalid)?;
        // Session settings of every connection, after any the URL carries. Generic plans: the
        // stream reads are planned once per connection, not at every call (PostgreSQL keeps
        // re-planning a statement whose generic plan it estimates dearer than its custom ones:
        // planning then cost more than the read itself); every statement here is a key lookup or
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
        let (client, conn) = config.connect(tls.clone()).await?;
        let driver = tokio::spawn(conn);
        let migrated = migrate(&client, opts.schema.as_deref()).await;
        drop(client);
        let _ = driver.await;
        migrated?;

        let manager = Manager::from_config(
            config.clone(),
            tls.clone(),
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
        let writers = Writers::start(shared);
        let nudger = tokio::spawn(nudge_wal_writer(config.clone(), tls.clone(), batches_rx));
        let background = tokio::spawn(listen_and_notify(config, tls, wake.clone(), appended_rx));
        let held_back = Arc::new(HeldBack::default());
        let warning = opts.held_back_warning.unwrap_or(DEFAULT_HELD_BACK_WARNING);
        let held_back_watch =
            tokio::spawn(held_back::watch(pool.clone(), held_back.clone(), warning));
        Ok(PgStore {
            inner: Arc::new(Inner {
                pool,
                wake,
                writers,
                background,
                nudger,
                held_back,
                held_back_watch,
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
        self.inner.writers.append(stream, expected, events).await
    }

    /// A stream's events from `from_version` on (or back), at most `max`.
    pub(crate) async fn read_stream(
        &self,
        stream: &str,
        from_version: u64,
        max: usize,
        direction: Direction,
    ) -> Result<Vec<RecordedEvent>> {
        read::read_stream(&self.inner.pool, stream, from_version, max, direction).await
    }

    /// `$all` from `from_position` on, at most `max`, below the oldest running transaction.
    pub(crate) async fn read_all(
        &self,
        from_position: u64,
        max: usize,
    ) -> Result<Vec<RecordedEvent>> {
        read::read_all(&self.inner.pool, from_position, max).await
    }

    /// `$all` from `from_position` on that passes `filter`, at most `max`.
    pub(crate) async fn read_filtered(
        &self,
        from_position: u64,
        max: usize,
        filter: &crate::filter::EventFilter,
    ) -> Result<Vec<RecordedEvent>> {
        read::read_filtered(&self.inner.pool, from_position, max, filter).await
    }

    /// The line below which `$all` is final now.
    pub(crate) async fn head(&self) -> Result<u64> {
        read::head(&self.inner.pool).await
    }

    /// The `pid` of the transaction holding `$all` back past the warning age, and its age.
    pub(crate) fn held_back(&self) -> Option<(u32, Duration)> {
        self.inner.held_back.get()
    }

    pub(crate) fn wake(&self) -> watch::Receiver<u64> {
        self.inner.wake.subscribe()
    }
}

#[cfg(test)]
mod tests;
