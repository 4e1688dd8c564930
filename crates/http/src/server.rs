//! `Server`: the accept loop, the connection cap, and graceful shutdown.

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::config::ServerConfig;
use crate::conn::{Shared, serve_connection};
use crate::router::Router;
use crate::trace::TraceStore;

/// Pause after an accept error such as `EMFILE` before trying again, so a full file table does
/// not turn the accept loop into a busy loop (hyper's `AddrIncoming` sleeps 1 s; 100 ms recovers
/// sooner once descriptors free up).
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(100);

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
                traces: TraceStore::default(),
                stopping: AtomicBool::new(false),
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
        let (tx, rx) = watch::channel(false);
        let cap = self.shared.config.limits.max_connections.max(1);
        let permits = Arc::new(Semaphore::new(cap));
        let rejecting = Arc::new(Semaphore::new(MAX_REJECTING));
        let mut tasks = JoinSet::new();
        let mut summary = ServeSummary::default();
        tokio::pin!(shutdown);
        loop {
            tokio::select! {
                biased;
                _ = &mut shutdown => break,
                Some(done) = tasks.join_next(), if !tasks.is_empty() => log_join(done),
                accepted = listener.accept() => {
                    let (stream, peer) = match accepted {
                        Ok(a) => a,
                        Err(e) if is_connection_error(&e) => continue,
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed; backing off");
                            tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
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
