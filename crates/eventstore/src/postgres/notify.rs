//! The store's background connections: LISTEN/NOTIFY (wake-ups of subscribers in this process
//! and others) and the WAL nudge that keeps group commits' flushes small.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The channel appends NOTIFY on after commit and subscribers LISTEN on.
const NOTIFY_CHANNEL: &str = "galleon_events";

/// Shortest time between two NOTIFYs of one store: the first append after a quiet spell is
/// announced at once, later ones are folded into one NOTIFY per interval. Each NOTIFY is a small
/// transaction on the server; under a stream of appends (bench `append, 1 writer`: one append
/// per ~4 ms) one NOTIFY per append cost measurable server CPU. Other processes' subscribers
/// learn of an append at most this much later (local subscribers are woken directly).
const NOTIFY_MIN_INTERVAL: Duration = Duration::from_millis(10);

/// While group-commit batches are being written, how often the store wakes PostgreSQL's WAL
/// writer ([`nudge_wal_writer`]). A batch writes megabytes of WAL that nothing flushes until its
/// commit (the WAL writer sleeps `wal_writer_delay`, 200 ms, unless an asynchronous commit wakes
/// it), so the commits that end a burst each waited for one large `fdatasync`. Woken every 2 ms,
/// the WAL writer flushes in the background while the batches are still being copied (it
/// flushes once `wal_writer_flush_after`, 1 MB, has been written), and a commit waits for the
/// rest only (measured in DESIGN-NOTES.md, "Schema 4 and the 100-writer ratio").
const WAL_NUDGE_INTERVAL: Duration = Duration::from_millis(2);

/// First wait before reconnecting the LISTEN connection; doubled per failure up to
/// [`RECONNECT_MAX`]. Guesses: quick recovery from a restart, no hammering of a down server.
const RECONNECT_MIN: Duration = Duration::from_millis(100);
/// Longest wait between reconnection attempts of the LISTEN connection.
const RECONNECT_MAX: Duration = Duration::from_secs(5);

/// The store's one long-lived extra connection: it LISTENs (turning notifications into wake-ups
/// of local subscribers) and sends one NOTIFY per burst of local appends, outside the append
/// transactions: a NOTIFY inside them would take PostgreSQL's database-wide notify lock at every
/// commit, a global lock by another name. A dropped connection is reopened with backoff, and
/// every (re)connection wakes subscribers, which then re-read what they may have missed.
pub(super) async fn listen_and_notify(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    wake: Arc<watch::Sender<u64>>,
    mut appended: watch::Receiver<u64>,
) {
    let mut backoff = RECONNECT_MIN;
    loop {
        match config.connect(tls.clone()).await {
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

/// Wakes PostgreSQL's WAL writer every [`WAL_NUDGE_INTERVAL`] while group-commit batches are
/// being written (`batches` above 0), with an empty transaction that takes a transaction id and
/// commits asynchronously: such a commit sets the WAL writer's latch, and the WAL writer then
/// flushes the WAL written so far (see [`WAL_NUDGE_INTERVAL`]). It changes no data, holds no
/// lock and is never waited for by an append; a failed connection is reopened with backoff, and
/// appends meanwhile only commit as they would without it. Each nudge uses one transaction id.
pub(super) async fn nudge_wal_writer(
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    mut batches: watch::Receiver<usize>,
) {
    let mut backoff = RECONNECT_MIN;
    loop {
        if batches.wait_for(|n| *n > 0).await.is_err() {
            return;
        }
        match config.connect(tls.clone()).await {
            Ok((client, conn)) => {
                let driver = tokio::spawn(conn);
                let setup = client.batch_execute("SET synchronous_commit = off").await;
                if setup.is_ok() {
                    backoff = RECONNECT_MIN;
                    loop {
                        if batches.wait_for(|n| *n > 0).await.is_err() {
                            driver.abort();
                            return;
                        }
                        let nudged = client
                            .batch_execute("BEGIN; SELECT pg_current_xact_id(); COMMIT")
                            .await;
                        if let Err(e) = nudged {
                            tracing::debug!(error = %e, "event store WAL nudge failed");
                            break;
                        }
                        tokio::time::sleep(WAL_NUDGE_INTERVAL).await;
                    }
                }
                driver.abort();
            }
            Err(e) => {
                tracing::debug!(error = %e, "event store WAL nudge connection could not be opened")
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(RECONNECT_MAX);
    }
}
