//! One reader of `$all` per store handle, fanned out to every live subscriber in memory.
//!
//! Before this, each [`crate::Subscription`] re-read `$all` on every wake-up: with 200 SSE
//! subscribers every append cost 200 queries (appends/s fell 15x on SQLite, 9.5x on
//! PostgreSQL). Now one task (the *tailer*) reads `$all` once per wake-up and publishes each
//! batch it read on a `tokio::sync::broadcast` channel; a live subscriber costs one slot
//! cursor and one wake-up per batch.
//!
//! The channel is a ring of [`crate::DEFAULT_SUBSCRIBER_BUFFER`] batches shared by all
//! subscribers: publishing never waits for anyone, so a slow subscriber blocks neither the
//! tailer nor the others. One that falls more than the ring behind is told it lagged; it then
//! reads the store itself from its own cursor and rejoins (`subscription.rs`), so it loses,
//! repeats and reorders nothing.
//!
//! Joining: a batch covers the positions `[from, to)` of `$all` (everything there is final and
//! was read whole), and batches are contiguous. [`Hub::join`] returns a receiver and the
//! tailer's cursor taken under the same lock the tailer publishes under, so the receiver gets
//! exactly the batches from that cursor on; the subscriber reads `[its cursor, that cursor)`
//! from the store itself, or skips what it has already seen.
//!
//! The tailer runs while anyone listens: the first [`Hub::join`] starts it at the store's head
//! ([`Source::head`]), and it stops once the last receiver is gone, so a store nobody follows
//! reads nothing.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{broadcast, watch};

use crate::error::Result;
use crate::filter::EventFilter;
use crate::types::RecordedEvent;

/// Events read from storage per query, by the tailer and by subscribers catching up. A guess:
/// large enough that catching up costs one query per ~100 KB, small enough to keep one batch's
/// memory small.
pub const SUBSCRIPTION_BATCH: usize = 500;

/// How often the tailer re-reads `$all` even without a wake-up. Wake-ups (in-process after
/// local appends, NOTIFY from other processes) are the fast path; this bounds the delay when
/// one is lost: a dropped LISTEN connection, a write by another process to the same SQLite
/// file, an event held back on PostgreSQL by an unrelated long transaction. One cheap indexed
/// query per second per store handle with subscribers (it was one per subscriber).
pub const SUBSCRIPTION_POLL_INTERVAL: Duration = Duration::from_secs(1);

/// Batches of the live feed kept for subscribers that are behind (`OpenOptions::
/// subscriber_buffer`, `galleon serve --events-subscriber-buffer`). A subscriber further behind
/// than this reads the store itself until it has caught up. A guess: under load a batch holds
/// one burst of appends, so 128 batches is seconds of lag at thousands of appends/s, and at most
/// 128 x [`SUBSCRIPTION_BATCH`] events (~30 MB of typical events) are held however many
/// subscribers there are.
pub const DEFAULT_SUBSCRIBER_BUFFER: usize = 128;

/// Largest `subscriber_buffer` accepted: the ring is allocated whole when the tailer starts.
pub const MAX_SUBSCRIBER_BUFFER: usize = 1 << 16;

/// First wait of the tailer (and of a subscriber reading for itself) after a transient read
/// error; doubled per failure up to [`RETRY_MAX`].
pub(crate) const RETRY_MIN: Duration = Duration::from_millis(50);
/// Longest wait between retries of a failing read.
pub(crate) const RETRY_MAX: Duration = Duration::from_secs(5);

/// What a store backend offers the fan-out: filtered `$all` reads, the head, and wake-ups.
/// Implemented by the store (`store.rs`), so this file needs nothing of it.
pub(crate) trait Source: Send + Sync + 'static {
    /// Up to `max` events of `$all` with position `>= from` that pass `filter`, in position
    /// order, all of them below a line under which nothing can appear any more.
    fn read<'a>(
        &'a self,
        from: u64,
        max: usize,
        filter: &'a EventFilter,
    ) -> BoxFuture<'a, Result<Vec<RecordedEvent>>>;
    /// A position below which every event is final and readable, and at or above which none is
    /// stored yet that a read could return: where the tailer starts.
    fn head(&self) -> BoxFuture<'_, Result<u64>>;
    /// Changes after commits (and, on PostgreSQL, on NOTIFY from other processes).
    fn wake(&self) -> watch::Receiver<u64>;
}

/// A run of `$all` read whole: every event with `from <= position < to`.
#[derive(Debug)]
pub(crate) struct Batch {
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) events: Vec<RecordedEvent>,
}

/// One message of the live feed.
#[derive(Debug, Clone)]
pub(crate) enum Feed {
    Events(Arc<Batch>),
    /// The tailer stopped on a permanent error; subscribers read for themselves (and so meet
    /// the error, or not, on their own).
    Failed,
}

/// Counters of the fan-out, for the stats endpoint and the tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FanoutStats {
    /// Subscribers following the live feed now.
    pub live_subscribers: usize,
    /// Batches the tailer published since the store was opened.
    pub batches_published: u64,
    /// Times a subscriber fell more than the buffer behind and went back to reading the store.
    pub lagged: u64,
    /// Reads of the store by subscribers themselves (catching up, lagged, or joining).
    pub subscriber_reads: u64,
}

/// The fan-out of one store handle: the source, and the tailer's channel while it runs.
pub(crate) struct Hub {
    source: Arc<dyn Source>,
    capacity: usize,
    state: Mutex<HubState>,
    published: AtomicU64,
    lagged: AtomicU64,
    subscriber_reads: AtomicU64,
}

#[derive(Default)]
struct HubState {
    /// The live feed; `Some` while the tailer runs.
    feed: Option<broadcast::Sender<Feed>>,
    /// One past the last position the tailer published (where its next batch starts).
    cursor: u64,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Hub {
    pub(crate) fn new(source: Arc<dyn Source>, capacity: usize) -> Hub {
        Hub {
            source,
            capacity: capacity.clamp(1, MAX_SUBSCRIBER_BUFFER),
            state: Mutex::new(HubState::default()),
            published: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            subscriber_reads: AtomicU64::new(0),
        }
    }

    pub(crate) fn source(&self) -> &dyn Source {
        &*self.source
    }

    pub(crate) fn note_lagged(&self) {
        self.lagged.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn note_read(&self) {
        self.subscriber_reads.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> FanoutStats {
        let live = self
            .lock()
            .feed
            .as_ref()
            .map_or(0, broadcast::Sender::receiver_count);
        FanoutStats {
            live_subscribers: live,
            batches_published: self.published.load(Ordering::Relaxed),
            lagged: self.lagged.load(Ordering::Relaxed),
            subscriber_reads: self.subscriber_reads.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver of the live feed and the position its first batch starts at; starts the
    /// tailer (at the store's head) when none runs. Errors are the head query's.
    pub(crate) async fn join(self: &Arc<Self>) -> Result<(broadcast::Receiver<Feed>, u64)> {
        if let Some(joined) = self.try_join() {
            return Ok(joined);
        }
        let head = self.source.head().await?;
        let mut st = self.lock();
        if let Some(tx) = &st.feed {
            // Another subscriber started it meanwhile.
            return Ok((tx.subscribe(), st.cursor));
        }
        let (tx, rx) = broadcast::channel(self.capacity);
        st.feed = Some(tx.clone());
        st.cursor = head;
        tokio::spawn(tail(self.clone(), tx, head));
        Ok((rx, head))
    }

    fn try_join(&self) -> Option<(broadcast::Receiver<Feed>, u64)> {
        let st = self.lock();
        st.feed.as_ref().map(|tx| (tx.subscribe(), st.cursor))
    }
}

/// The tailer: reads `$all` from `cursor` on every wake-up (or poll), publishes what it read,
/// and stops when nobody listens any more.
async fn tail(hub: Arc<Hub>, tx: broadcast::Sender<Feed>, mut cursor: u64) {
    let mut wake = hub.source.wake();
    let all = EventFilter::all();
    let mut retry = RETRY_MIN;
    loop {
        {
            let mut st = hub.lock();
            if tx.receiver_count() == 0 {
                // Under the lock a joiner takes: it either subscribed already or will start a
                // new tailer.
                st.feed = None;
                return;
            }
        }
        // Mark the wake-up seen *before* reading, so an append that commits after the read
        // started still wakes the wait below.
        wake.borrow_and_update();
        match hub.source.read(cursor, SUBSCRIPTION_BATCH, &all).await {
            Ok(events) => {
                retry = RETRY_MIN;
                let full = events.len() == SUBSCRIPTION_BATCH;
                if let Some(last) = events.last() {
                    let to = last.position + 1;
                    let batch = Arc::new(Batch {
                        from: cursor,
                        to,
                        events,
                    });
                    cursor = to;
                    let mut st = hub.lock();
                    st.cursor = to;
                    // No receiver left is not an error: the check above ends the loop.
                    let _ = tx.send(Feed::Events(batch));
                    hub.published.fetch_add(1, Ordering::Relaxed);
                }
                if full {
                    continue;
                }
                tokio::select! {
                    _ = wake.changed() => {}
                    _ = tokio::time::sleep(SUBSCRIPTION_POLL_INTERVAL) => {}
                    _ = tx.closed() => {}
                }
            }
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, retry_in = ?retry, "event fan-out read failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = tx.closed() => {}
                }
                retry = (retry * 2).min(RETRY_MAX);
            }
            Err(e) => {
                tracing::error!(error = %e, "event fan-out stopped; subscribers read for themselves");
                let mut st = hub.lock();
                st.feed = None;
                let _ = tx.send(Feed::Failed);
                return;
            }
        }
    }
}
