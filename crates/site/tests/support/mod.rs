//! The site's tests' shared pieces: [`Site::open`]'s router served in-process by a galleon-http
//! `Server` on 127.0.0.1:0 (a thread and runtime of its own), and a capture of the `tracing`
//! log for the tests that read it.
#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, Once, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use galleon_client::Client;
use galleon_http::{Server, ServerConfig};
use galleon_site::{Site, SiteConfig};

pub mod live_client;

/// Longest a test waits for an answer or a state before failing.
pub const TIMEOUT: Duration = Duration::from_secs(30);

/// The repository's example site.
pub fn site_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../site")
}

/// The config of the site in `dir` with `galleon serve`'s defaults, except that SIGHUP reloads
/// nothing (every site of a test binary would reload; the signal is `galleon serve`'s test).
pub fn config(dir: &Path) -> SiteConfig {
    SiteConfig {
        dir: dir.to_owned(),
        reload_on_sighup: false,
        ..SiteConfig::default()
    }
}

/// The site served on 127.0.0.1:0 until dropped (then the server stops and the pool is joined).
pub struct TestSite {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl TestSite {
    /// Opens the site of `config` and serves it, with the `x-galleon-write-policy` header on and
    /// as many bulk writers as `config` says (as `galleon serve` does).
    pub fn start(config: SiteConfig) -> TestSite {
        TestSite::start_with_events(config, None)
    }

    /// [`TestSite::start`] with the event store at `events` (a URL and its options) opened in
    /// the server's runtime, as `galleon serve` opens it, and given to the site.
    pub fn start_with_events(
        mut config: SiteConfig,
        events: Option<(String, galleon_eventstore::OpenOptions)>,
    ) -> TestSite {
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut server_config = ServerConfig::default();
                server_config.policy_header = Some("x-galleon-write-policy");
                server_config.bulk_writers = config.bulk_writers;
                if let Some((url, options)) = events {
                    match galleon_eventstore::Store::open_with(&url, options).await {
                        Ok(store) => config.events = Some(store),
                        Err(e) => {
                            ready_tx
                                .send(Err(format!("opening the store: {e}")))
                                .unwrap();
                            return;
                        }
                    }
                }
                let site = match Site::open(config) {
                    Ok(site) => site,
                    Err(e) => {
                        ready_tx.send(Err(format!("{e:#}"))).unwrap();
                        return;
                    }
                };
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready_tx.send(Ok(listener.local_addr().unwrap())).unwrap();
                let cpu = site.cpu.clone();
                Server::new(site.router, server_config)
                    .with_offload(cpu.clone())
                    .serve(listener, async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
                drop(site.guards);
                tokio::task::spawn_blocking(move || cpu.join())
                    .await
                    .unwrap();
            });
        });
        let addr = ready_rx
            .recv_timeout(TIMEOUT)
            .expect("the site did not start")
            .unwrap_or_else(|e| panic!("the site did not open: {e}"));
        TestSite {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The repository's site with `galleon serve`'s defaults.
    pub fn default_site() -> TestSite {
        TestSite::start(config(&site_dir()))
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr, TIMEOUT).unwrap()
    }
}

impl Drop for TestSite {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            // A panic in the server thread fails the test, unless the test is failing already.
            if t.join().is_err() && !std::thread::panicking() {
                panic!("the server thread panicked");
            }
        }
    }
}

/// Waits (bounded by [`TIMEOUT`]) until `cond` holds.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < TIMEOUT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

static LOG: Mutex<Vec<u8>> = Mutex::new(Vec::new());
static TURN: Mutex<()> = Mutex::new(());

/// Where the captured log goes.
struct Capture;

impl std::io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        LOG.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Starts capturing the log (info and up) of the whole test binary, and takes the turn of the
/// tests that read it: one at a time, each from an empty log, so none reads another's lines.
pub fn log_turn() -> MutexGuard<'static, ()> {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        tracing_subscriber::fmt()
            .with_writer(|| Capture)
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .init();
    });
    let guard = TURN.lock().unwrap_or_else(PoisonError::into_inner);
    LOG.lock().unwrap_or_else(PoisonError::into_inner).clear();
    guard
}

/// What was logged since [`log_turn`].
pub fn log() -> String {
    String::from_utf8_lossy(&LOG.lock().unwrap_or_else(PoisonError::into_inner)).into_owned()
}

/// Drops the PostgreSQL schema `schema` of the database at `url` (a test's own).
pub fn drop_pg_schema(url: &str, schema: &str) {
    pg_exec(url, &format!("DROP SCHEMA {schema} CASCADE"));
}

/// Runs `sql` (statements separated by `;`) on the database at `url`, on a connection of its own.
pub fn pg_exec(url: &str, sql: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(conn);
        client.batch_execute(sql).await.unwrap();
        drop(client);
        let _ = driver.await;
    });
}
