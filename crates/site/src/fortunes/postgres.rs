//! `/fortunes` on PostgreSQL: a fixed set of tokio-postgres connections, each with the query
//! prepared once; requests take them in turn, and the requests sharing a connection are
//! pipelined on it (tokio-postgres writes a query while earlier ones are still answered). A
//! connection that fails is opened again by the next request that picks it; until then those
//! requests answer 503. No TLS: the database is expected on this host or a private network.
//!
//! Batched (the default, `--fortunes-batch`): each request still runs its own query, but
//! requests queue for a driver task per connection, which yields while that lets more ready
//! requests queue (`gather`) and then starts all the queued queries in one poll, so
//! tokio-postgres writes them to the socket in one `sendto` and PostgreSQL wakes once for them.
//! Unbatched, tokio runs the connection's task right after each request's (its LIFO slot): one
//! 32-byte `sendto` and one wake-up of PostgreSQL per request. At 50 clients, 16,016 requests
//! took 699 `sendto`s batched (up to 50 queries in one), 15,046 for 15,088 unbatched
//! (`bench/results/fortunes.txt`).

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use futures::StreamExt as _;
use futures::stream::FuturesUnordered;
use tokio::sync::{Notify, oneshot};
use tokio_postgres::{Client, NoTls, Row, Statement};

use super::{CANONICAL, Fortune};

/// How long opening a connection may take when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The PostgreSQL connections of `/fortunes` (cheap to clone: one pool).
#[derive(Clone)]
pub struct Postgres(Arc<Inner>);

struct Inner {
    config: tokio_postgres::Config,
    /// `DB on HOST`, for the log (never the password).
    label: String,
    table: String,
    select: String,
    slots: Box<[Slot]>,
    next: AtomicUsize,
    /// Held while the table is created and seeded; true once it is.
    ready: tokio::sync::Mutex<bool>,
    /// Queries go through each connection's driver task (see the module's docs).
    batch: bool,
}

/// One connection, opened when first needed and again after it fails.
struct Slot {
    open: RwLock<Option<Arc<Conn>>>,
    /// One request opens the connection; the others that picked it wait for it.
    opening: tokio::sync::Mutex<()>,
}

struct Conn {
    client: Client,
    select: Statement,
    /// Requests waiting for the driver to start their query (batched only).
    queue: Mutex<Queue>,
    /// Wakes the driver when the queue stops being empty, and when the connection closes.
    queued: Arc<Notify>,
}

type Answer = oneshot::Sender<Result<Vec<Row>, tokio_postgres::Error>>;

#[derive(Default)]
struct Queue {
    waiting: Vec<Answer>,
    /// The driver has stopped: new requests must not wait for it.
    closed: bool,
}

impl fmt::Debug for Postgres {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Postgres")
            .field("database", &self.0.label)
            .field("table", &self.0.table)
            .field("connections", &self.0.slots.len())
            .finish_non_exhaustive()
    }
}

impl Postgres {
    /// The pool of `n` (at least 1) connections to `url`, reading `table`, its queries batched
    /// per connection or not; nothing is opened yet.
    pub fn new(url: &str, table: &str, n: usize, batch: bool) -> anyhow::Result<Postgres> {
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| anyhow::anyhow!("--fortunes-db: not a PostgreSQL URL: {e}"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("galleon-fortunes");
        }
        let host = match config.get_hosts().first() {
            Some(tokio_postgres::config::Host::Tcp(h)) => h.clone(),
            Some(tokio_postgres::config::Host::Unix(p)) => p.display().to_string(),
            None => "localhost".to_owned(),
        };
        let label = format!(
            "PostgreSQL database {} on {host}",
            config.get_dbname().unwrap_or("(the user's)")
        );
        let slots = (0..n.max(1))
            .map(|_| Slot {
                open: RwLock::new(None),
                opening: tokio::sync::Mutex::new(()),
            })
            .collect();
        Ok(Postgres(Arc::new(Inner {
            config,
            label,
            table: table.to_owned(),
            select: format!("SELECT id, message FROM {table}"),
            slots,
            next: AtomicUsize::new(0),
            ready: tokio::sync::Mutex::new(false),
            batch,
        })))
    }

    /// What the pool reads, for the log: database, host, table, connections.
    pub fn describe(&self) -> String {
        let n = self.0.slots.len();
        format!(
            "{}, table {}, {n} connection{}, {}",
            self.0.label,
            self.0.table,
            if n == 1 { "" } else { "s" },
            if self.0.batch {
                "queries batched"
            } else {
                "queries unbatched"
            }
        )
    }

    /// Opens every connection now (creating and seeding the table if needed), so that the
    /// first requests do not wait for them and a database that is down shows at start.
    pub async fn connect_all(&self) -> Result<(), String> {
        for i in 0..self.0.slots.len() {
            self.conn(i).await?;
        }
        Ok(())
    }

    /// Reads every row on the next connection in turn and renders the page. Errors are for
    /// the log.
    pub async fn page(&self) -> Result<galleon_iolist::IoList, String> {
        let i = self.0.next.fetch_add(1, Ordering::Relaxed) % self.0.slots.len();
        let conn = self.conn(i).await?;
        let read = |e: tokio_postgres::Error| {
            format!(
                "reading the fortunes from {}: {}",
                self.0.label,
                describe(&e)
            )
        };
        let rows = if self.0.batch {
            let (tx, rx) = oneshot::channel();
            {
                let mut q = conn.queue.lock().unwrap_or_else(PoisonError::into_inner);
                if q.closed {
                    return Err(format!("the connection to {} has closed", self.0.label));
                }
                q.waiting.push(tx);
                if q.waiting.len() == 1 {
                    conn.queued.notify_one();
                }
            }
            rx.await
                .map_err(|_| format!("the connection to {} has closed", self.0.label))?
                .map_err(read)?
        } else {
            conn.client.query(&conn.select, &[]).await.map_err(read)?
        };
        let fortunes = rows
            .iter()
            .map(|r| {
                Ok(Fortune {
                    id: r.try_get(0)?,
                    message: r.try_get(1)?,
                })
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|e| format!("reading the rows of {}: {}", self.0.table, describe(&e)))?;
        super::render(fortunes).map_err(|e| format!("rendering the fortunes: {e}"))
    }

    /// Connection `i`, opened now if it is not open.
    async fn conn(&self, i: usize) -> Result<Arc<Conn>, String> {
        let slot = &self.0.slots[i];
        if let Some(c) = current(slot) {
            return Ok(c);
        }
        let _opening = slot.opening.lock().await;
        if let Some(c) = current(slot) {
            return Ok(c);
        }
        let conn = Arc::new(self.open().await?);
        if self.0.batch {
            tokio::spawn(drive(conn.clone()));
        }
        *slot.open.write().unwrap_or_else(PoisonError::into_inner) = Some(conn.clone());
        Ok(conn)
    }

    /// A new connection, with the table ready and the query prepared on it.
    async fn open(&self) -> Result<Conn, String> {
        let inner = &self.0;
        let (mut client, connection) = inner
            .config
            .connect(NoTls)
            .await
            .map_err(|e| format!("connecting to {}: {}", inner.label, describe(&e)))?;
        let label = inner.label.clone();
        let queued = Arc::new(Notify::new());
        let on_close = queued.clone();
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::error!(target: "galleon::fortunes", "the connection to {label} failed: {}", describe(&e));
            }
            // The driver sees the client closed and ends.
            on_close.notify_one();
        });
        {
            let mut ready = inner.ready.lock().await;
            if !*ready {
                seed(&mut client, &inner.table).await.map_err(|e| {
                    format!(
                        "creating the table {} in {}: {}",
                        inner.table,
                        inner.label,
                        describe(&e)
                    )
                })?;
                *ready = true;
            }
        }
        let select = client.prepare(&inner.select).await.map_err(|e| {
            format!(
                "preparing {:?} on {}: {}",
                inner.select,
                inner.label,
                describe(&e)
            )
        })?;
        Ok(Conn {
            client,
            select,
            queue: Mutex::new(Queue::default()),
            queued,
        })
    }
}

/// Most times the driver yields to let more requests queue before it starts their queries.
const MAX_GATHER_YIELDS: usize = 4;

/// Yields to the runtime while that brings more requests into the queue: each yield lets the
/// tasks that are ready run, and the runtime poll its sockets once more for requests that have
/// just arrived. The driver, woken from its yield, runs before the tasks that poll made ready
/// (tokio's LIFO slot), so a yield shows the requests of the poll before it: the second yield
/// is always taken, and the first after it that brings none ends it (at most
/// [`MAX_GATHER_YIELDS`]).
async fn gather(conn: &Conn) {
    let queued = || {
        conn.queue
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .waiting
            .len()
    };
    let mut seen = queued();
    for i in 0..MAX_GATHER_YIELDS {
        tokio::task::yield_now().await;
        let now = queued();
        if now == seen && i > 0 {
            break;
        }
        seen = now;
    }
}

/// A connection's driver: starts the queued requests' queries together, each answered to its
/// request as it completes; ends (failing the requests still queued) when the connection closes.
async fn drive(conn: Arc<Conn>) {
    let mut running = FuturesUnordered::new();
    loop {
        let waiting = std::mem::take(
            &mut conn
                .queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .waiting,
        );
        for answer in waiting {
            let conn = conn.clone();
            running.push(async move {
                let rows = conn.client.query(&conn.select, &[]).await;
                let _ = answer.send(rows);
            });
        }
        if conn.client.is_closed() && running.is_empty() {
            break;
        }
        tokio::select! {
            // Polling `running` starts the new queries: all of them before the connection's
            // task runs, so they leave in one write.
            Some(()) = running.next(), if !running.is_empty() => {}
            () = conn.queued.notified() => gather(&conn).await,
        }
    }
    let mut q = conn.queue.lock().unwrap_or_else(PoisonError::into_inner);
    q.closed = true;
    q.waiting.clear();
}

/// The slot's connection when it is open and not closed.
fn current(slot: &Slot) -> Option<Arc<Conn>> {
    let open = slot.open.read().unwrap_or_else(PoisonError::into_inner);
    open.as_ref().filter(|c| !c.client.is_closed()).cloned()
}

/// Creates `table` when missing and fills it with the canonical rows when empty, in one
/// transaction.
async fn seed(client: &mut Client, table: &str) -> Result<(), tokio_postgres::Error> {
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (id integer PRIMARY KEY, message varchar(2048) NOT NULL)"
        ))
        .await?;
    let tx = client.transaction().await?;
    let count: i64 = tx
        .query_one(&format!("SELECT count(*) FROM {table}"), &[])
        .await?
        .get(0);
    if count == 0 {
        let insert = tx
            .prepare(&format!(
                "INSERT INTO {table} (id, message) VALUES ($1, $2)"
            ))
            .await?;
        for (id, message) in CANONICAL {
            tx.execute(&insert, &[&id, &message]).await?;
        }
    }
    tx.commit().await
}

/// The error with what PostgreSQL or the socket said (tokio-postgres's own text is terse).
fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return format!("{e}: {}", db.message());
    }
    match std::error::Error::source(e) {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    }
}
