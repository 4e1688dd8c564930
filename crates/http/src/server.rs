//! `Server`: the accept loop, the connection cap, and graceful shutdown.
//!
//! `Server::with_traces` (record traced responses), `Server::with_offload` (streamed chunks on a
//! `galleon-offload` pool), `Server::with_observer`. `Server::serve` starts the bulk writers when
//! it starts serving and shuts them down when it returns; at shutdown it stops accepting, closes
//! idle connections, lets in-flight responses finish within `shutdown_grace` and aborts the rest.
//! Upgraded connections (`Upgraded`) count as running until their owner returns: told by
//! `Upgraded::stopping`, they get the same grace, then are aborted.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::ServerConfig;
use crate::h1::{Shared, serve_connection};
use crate::router::Router;
use crate::trace::TraceStore;

/// Pause after an accept error such as `EMFILE` before trying again, so a full file table does
/// not turn the accept loop into a busy loop (hyper's `AddrIncoming` sleeps 1 s; 100 ms recovers
/// sooner once descriptors free up).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

/// Least time between two warnings of a failing `accept` (out of descriptors, say), so a full
/// file table does not flood the log.
const ACCEPT_WARNING_INTERVAL: Duration = Duration::from_secs(1);

/// `EMFILE` or `ENFILE`: the process or the system has no descriptor left.
fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE))
}

/// Connections over the cap being answered 503 at once; beyond this many the extra ones are
/// just closed. Bounds the work a connection flood can cause.
const MAX_REJECTING: usize = 64;

/// How long a refused connection gets to read its 503 before it is closed.
const REJECT_TIMEOUT: Duration = Duration::from_millis(500);

/// The answer to a connection over [`Limits::max_connections`](crate::Limits).
const BUSY_RESPONSE: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\n\
content-length: 26\r\nretry-after: 1\r\nconnection: close\r\n\r\n503 too many connections\r\n";

/// An HTTP/1.1 server: a [`Router`] and a [`ServerConfig`], run on a listener until a shutdown
/// future completes.
///
/// # Examples
/// ```
/// use galleon_http::{Request, Response, Router, Server, ServerConfig};
///
/// let rt = tokio::runtime::Runtime::new().unwrap();
/// rt.block_on(async {
///     let router = Router::new().get("/", |_req: Request| async { Response::html("hi\n") });
///     let mut config = ServerConfig::default();
///     config.limits.max_connections = 100;
///     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
///     // Serves until the shutdown future completes: here at once, so it returns.
///     let summary = Server::new(router, config)
///         .serve(listener, async {})
///         .await
///         .unwrap();
///     assert_eq!(summary.connections, 0);
/// });
/// ```
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
}

/// What [`Server::serve`] did, returned once it has shut down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServeSummary {
    /// Connections served.
    pub connections: u64,
    /// Connections refused with 503 because the cap was reached.
    pub refused: u64,
    /// Connections still running when the grace period ended, aborted.
    pub aborted: u64,
}

impl Server {
    /// A server for `router` under `config`.
    pub fn new(router: Router, config: ServerConfig) -> Server {
        Server {
            shared: Arc::new(Shared {
                router,
                config,
                traces: None,
                buffered_body_bytes: AtomicU64::new(0),
                stopping: AtomicBool::new(false),
                chunk_pool: None,
                bulk: std::sync::OnceLock::new(),
                observer: None,
            }),
        }
    }

    /// Records the writes of every response whose request carries [`TRACE_HEADER`]`: TOKEN`
    /// into `traces`, where [`TraceStore::handler`], mounted on a route, serves them. Off unless
    /// called: a trace shows memory addresses.
    ///
    /// [`TRACE_HEADER`]: crate::TRACE_HEADER
    pub fn with_traces(self, traces: TraceStore) -> Server {
        let shared = Arc::try_unwrap(self.shared)
            .unwrap_or_else(|_| unreachable!("a server not yet serving has one owner"));
        Server {
            shared: Arc::new(Shared {
                traces: Some(traces),
                ..shared
            }),
        }
    }

    /// Computes the chunks of streamed bodies ([`Body::iter`](crate::Body::iter)) as jobs of
    /// `pool`, kind [`STREAM_CHUNK_KIND`](crate::STREAM_CHUNK_KIND), under the policy the pool
    /// gives that kind, instead of on tokio's blocking pool: a cheap chunk is computed inline by
    /// the task writing the stream (a bulk writer, or a request worker under
    /// [`ServerConfig::bulk_writers`](crate::ServerConfig::bulk_writers) 0, where you may want
    /// to set the kind to [`Policy::Offload`](galleon_offload::Policy::Offload)), a costly one on
    /// the pool's fixed set of threads, so a burst of streams does not start hundreds of
    /// blocking threads, and renders do not queue behind (or ahead of) file reads.
    pub fn with_offload(self, pool: galleon_offload::Pool) -> Server {
        let shared = Arc::try_unwrap(self.shared)
            .unwrap_or_else(|_| unreachable!("a server not yet serving has one owner"));
        Server {
            shared: Arc::new(Shared {
                chunk_pool: Some(crate::h1::ChunkPool::new(pool)),
                ..shared
            }),
        }
    }

    /// Tells `observer` of every answered request (route, status, time, write calls) and every
    /// connection opened, ended or refused: what a stats page, metrics or an access log record.
    /// Without one the server measures nothing.
    pub fn with_observer(self, observer: Arc<dyn crate::Observer>) -> Server {
        let shared = Arc::try_unwrap(self.shared)
            .unwrap_or_else(|_| unreachable!("a server not yet serving has one owner"));
        Server {
            shared: Arc::new(Shared {
                observer: Some(observer),
                ..shared
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ServerConfig {
        &self.shared.config
    }

    /// Accepts and serves connections until `shutdown` completes; then stops accepting (new
    /// connections are refused by the kernel once the listener is closed), lets in-flight
    /// responses finish for up to [`ServerConfig::shutdown_grace`], closes idle keep-alive
    /// connections at once, and returns.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send,
    ) -> io::Result<ServeSummary> {
        crate::trim::pin_allocator_thresholds();
        // Dropped when serving ends, which closes the connections it is still writing.
        let bulk = match self.shared.config.bulk_writers {
            0 => None,
            n => Some(crate::bulk::BulkWriters::start(
                n,
                self.shared.config.bulk_priority,
            )?),
        };
        if let Some(handle) = bulk.as_ref().and_then(|b| b.handle()) {
            let _ = self.shared.bulk.set(handle);
        }
        let (tx, rx) = watch::channel(false);
        let cap = self.shared.config.limits.max_connections.max(1);
        let permits = Arc::new(Semaphore::new(cap));
        let rejecting = Arc::new(Semaphore::new(MAX_REJECTING));
        let mut tasks = JoinSet::new();
        let mut summary = ServeSummary::default();
        tokio::pin!(shutdown);
        // One descriptor held back for the moment the process runs out: freed, it lets the
        // accept loop take a waiting connection and answer 503 instead of leaving it hanging.
        let mut spare_fd = std::fs::File::open("/dev/null").ok();
        let mut last_accept_warning: Option<Instant> = None;
        // Connections closed since freed memory was last given back (see `trim.rs`).
        let mut closed_since_trim = 0u64;
        let mut closed_this_tick = 0u64;
        let mut trim_tick = tokio::time::interval(crate::trim::TRIM_INTERVAL);
        trim_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => {
                    closed_since_trim += 1;
                    closed_this_tick += 1;
                    log_join(done);
                }
                _ = trim_tick.tick() => {
                    if crate::trim::should_trim(closed_since_trim, closed_this_tick) {
                        closed_since_trim = 0;
                        tokio::task::spawn_blocking(crate::trim::release_free_memory);
                    }
                    closed_this_tick = 0;
                }
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) if is_connection_error(&e) => continue,
                        Err(e) => {
                            if last_accept_warning.is_none_or(|t| t.elapsed() >= ACCEPT_WARNING_INTERVAL) {
                                tracing::warn!(error = %e, "accept failed; refusing new connections with 503 until it recovers");
                                last_accept_warning = Some(Instant::now());
                            }
                            if is_out_of_descriptors(&e) && let Some(fd) = spare_fd.take() {
                                // Give the waiting client an answer instead of a hang: free the
                                // spare descriptor, take the connection, say 503, close.
                                drop(fd);
                                if let Ok(Ok((stream, _))) = tokio::time::timeout(ACCEPT_ERROR_BACKOFF, listener.accept()).await {
                                    summary.refused += 1;
                                    let _ = stream.try_write(BUSY_RESPONSE);
                                }
                                spare_fd = std::fs::File::open("/dev/null").ok();
                            } else {
                                tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
                            }
                            continue;
                        }
                    };
                    match permits.clone().try_acquire_owned() {
                        Ok(permit) => {
                            summary.connections += 1;
                            let shared = self.shared.clone();
                            let rx = rx.clone();
                            tasks.spawn(async move {
                                serve_connection(stream, peer, shared, rx).await;
                                drop(permit);
                            });
                        }
                        Err(_) => {
                            summary.refused += 1;
                            if let Some(o) = &self.shared.observer {
                                o.refused();
                            }
                            if let Ok(p) = rejecting.clone().try_acquire_owned() {
                                tasks.spawn(async move {
                                    refuse(stream).await;
                                    drop(p);
                                });
                            }
                        }
                    }
                }
            }
        }
        drop(listener);
        self.shared.stopping.store(true, Ordering::Release);
        let _ = tx.send(true);
        let deadline = Instant::now() + self.shared.config.shutdown_grace;
        while !tasks.is_empty() {
            match tokio::time::timeout_at(deadline, tasks.join_next()).await {
                Ok(Some(done)) => log_join(done),
                Ok(None) => break,
                Err(_) => {
                    summary.aborted = tasks.len() as u64;
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    break;
                }
            }
        }
        drop(bulk);
        Ok(summary)
    }
}

fn log_join(r: Result<(), tokio::task::JoinError>) {
    if let Err(e) = r
        && e.is_panic()
    {
        tracing::error!(error = %e, "connection task panicked");
    }
}

/// Errors that concern one incoming connection, not the listener.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    )
}

async fn refuse(mut stream: TcpStream) {
    let _ = tokio::time::timeout(REJECT_TIMEOUT, async {
        stream.write_all(BUSY_RESPONSE).await?;
        stream.shutdown().await?;
        let mut scratch = [0u8; 1024];
        while tokio::io::AsyncReadExt::read(&mut stream, &mut scratch).await? > 0 {}
        io::Result::Ok(())
    })
    .await;
}

/// Completes on SIGINT or SIGTERM (or Ctrl-C where those do not exist).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let (Ok(mut int), Ok(mut term)) = (
            signal(SignalKind::interrupt()),
            signal(SignalKind::terminate()),
        ) else {
            let _ = tokio::signal::ctrl_c().await;
            return;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_response_length_is_right() {
        let text = std::str::from_utf8(BUSY_RESPONSE).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
    }
}
