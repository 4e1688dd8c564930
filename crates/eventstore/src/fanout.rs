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
//! Subscribers filtering on a category join that category's feed instead (`HubState::
//! categories`): the tailer splits each batch by category for the categories followed, so a
//! subscriber is woken only by batches holding its category's events, with the same join rule
//! (a category feed's batches are contiguous for its category).
//!
//! The tailer runs while anyone listens: the first [`Hub::join`] starts it at the store's head
//! ([`Source::head`]), and it stops once the last receiver is gone, so a store nobody follows
//! reads nothing.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use tokio::sync::{broadcast, watch};

use crate::error::Result;
use crate::filter::{EventFilter, category_of};
use crate::time::Timestamp;
use crate::types::RecordedEvent;

/// Events read from storage per query, by the tailer and by subscribers catching up. A guess:
/// large enough that catching up costs one query per ~100 KB, small enough to keep one batch's
/// memory small.
pub const SUBSCRIPTION_BATCH: usize = 500;

/// Most events the tailer reads per query. Each read asks for twice what the last non-empty one
/// returned, from [`SUBSCRIPTION_BATCH`] up to this: after a full read (it is behind: a burst of
/// appends) it doubles, and after a short one it stays large enough for another burst of the
/// same size in one read (a read returns only what is there, so asking for more costs nothing
/// when there is less). Each read is a round trip that waits its turn behind every subscriber
/// task on the runtime, so under load the feed's rate is events per read times reads per second;
/// larger reads when behind raised it (bench/results/eventstore-consumers.txt).
/// The default of `OpenOptions::tail_batch_max` (`galleon serve --events-tail-batch`).
pub const TAIL_BATCH_MAX: usize = 4 * SUBSCRIPTION_BATCH;

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
/// 128 x [`TAIL_BATCH_MAX`] events (~120 MB of typical events; ~30 MB unless the tailer is
/// behind) are held however many subscribers there are.
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

/// Formats one event as the bytes a subscriber writes (galleon-eventstore-http's `sse_frame`: an SSE frame).
pub type FrameFormat = fn(&RecordedEvent) -> Bytes;

/// A run of `$all` read whole: every event with `from <= position < to`.
#[derive(Debug)]
pub(crate) struct Batch {
    pub(crate) from: u64,
    pub(crate) to: u64,
    pub(crate) events: Vec<RecordedEvent>,
    /// The events formatted, once for every subscriber that wants frames (the first asks).
    frames: OnceLock<BatchFrames>,
}

/// A batch's events formatted back to back: event `i` is `bytes[offsets[i]..offsets[i + 1]]`.
#[derive(Debug, Clone)]
pub(crate) struct BatchFrames {
    /// The formatter (its address): a batch caches one.
    format: usize,
    pub(crate) bytes: Bytes,
    pub(crate) offsets: Vec<usize>,
}

impl BatchFrames {
    fn new(events: &[RecordedEvent], format: FrameFormat) -> BatchFrames {
        let mut offsets = Vec::with_capacity(events.len() + 1);
        let mut out = Vec::new();
        offsets.push(0);
        for e in events {
            out.extend_from_slice(&format(e));
            offsets.push(out.len());
        }
        BatchFrames {
            format: format as usize,
            bytes: Bytes::from(out),
            offsets,
        }
    }
}

impl Batch {
    pub(crate) fn new(from: u64, to: u64, events: Vec<RecordedEvent>) -> Batch {
        Batch {
            from,
            to,
            events,
            frames: OnceLock::new(),
        }
    }

    /// The batch's frames by `format`: formatted by the first subscriber that asks, shared by
    /// all (another formatter than the cached one formats for itself).
    pub(crate) fn frames(&self, format: FrameFormat) -> Cow<'_, BatchFrames> {
        let cached = self
            .frames
            .get_or_init(|| BatchFrames::new(&self.events, format));
        if cached.format == format as usize {
            Cow::Borrowed(cached)
        } else {
            Cow::Owned(BatchFrames::new(&self.events, format))
        }
    }
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
    /// Events in those batches.
    pub events_published: u64,
    /// Times a subscriber fell more than the buffer behind and went back to reading the store.
    pub lagged: u64,
    /// Reads of the store by subscribers themselves (catching up, lagged, or joining).
    pub subscriber_reads: u64,
}

/// The fan-out of one store handle: the source, and the tailer's channel while it runs.
pub(crate) struct Hub {
    source: Arc<dyn Source>,
    capacity: usize,
    /// Most events per tailer read ([`TAIL_BATCH_MAX`] by default).
    tail_max: usize,
    state: Mutex<HubState>,
    published: AtomicU64,
    events_published: AtomicU64,
    lagged: AtomicU64,
    subscriber_reads: AtomicU64,
    /// Subscriptions open now (see [`SubscriberGuard`]).
    subscribers: AtomicUsize,
    /// One past the last position published (the `$all` watermark of this handle).
    watermark: AtomicU64,
    /// Microseconds from the newest event's `recorded_at` to its publication, last batch;
    /// `u64::MAX` until one was published.
    lag_micros: AtomicU64,
}

/// Counts one open subscription of a hub while it lives.
pub(crate) struct SubscriberGuard(Arc<Hub>);

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        self.0.subscribers.fetch_sub(1, Ordering::Relaxed);
    }
}

#[derive(Default)]
struct HubState {
    /// The live feed; `Some` while the tailer runs.
    feed: Option<broadcast::Sender<Feed>>,
    /// One past the last position the tailer published (where its next batch starts).
    cursor: u64,
    /// A feed per category some subscriber filters on, carrying only that category's events,
    /// so a subscriber to one category is woken for its own events only, not for every batch.
    categories: HashMap<String, CategoryFeed>,
}

/// The live feed of one category. Its batches are contiguous for that category: each runs
/// from where the previous one ended (or from the tailer's cursor when the feed was made),
/// since the batches in between held none of its events.
struct CategoryFeed {
    tx: broadcast::Sender<Feed>,
    /// One past the last position its batches covered: where its next batch starts.
    to: u64,
}

impl HubState {
    /// A receiver of the feed `category` names (the whole feed for `None`) and the position its
    /// first batch starts at. Only with the tailer running (`feed` is `Some`).
    fn subscribe(
        &mut self,
        category: Option<&str>,
        capacity: usize,
    ) -> Option<(broadcast::Receiver<Feed>, u64)> {
        let tx = self.feed.as_ref()?;
        let Some(category) = category else {
            return Some((tx.subscribe(), self.cursor));
        };
        let cursor = self.cursor;
        let feed = self
            .categories
            .entry(category.to_owned())
            .or_insert_with(|| CategoryFeed {
                tx: broadcast::channel(capacity).0,
                to: cursor,
            });
        Some((feed.tx.subscribe(), feed.to))
    }

    /// Receivers of every feed, forgetting category feeds nobody follows any more.
    fn receivers(&mut self) -> usize {
        self.categories.retain(|_, f| f.tx.receiver_count() > 0);
        let cats: usize = self
            .categories
            .values()
            .map(|f| f.tx.receiver_count())
            .sum();
        self.feed
            .as_ref()
            .map_or(0, broadcast::Sender::receiver_count)
            + cats
    }

    /// Sends each category feed the events of `batch` in its category, if it has any.
    fn publish_categories(&mut self, batch: &Batch) {
        if self.categories.is_empty() {
            return;
        }
        let mut split: HashMap<&str, Vec<RecordedEvent>> = HashMap::new();
        for e in &batch.events {
            let c = category_of(&e.stream_id);
            if self.categories.contains_key(c) {
                split.entry(c).or_default().push(e.clone());
            }
        }
        for (c, events) in split {
            if let Some(feed) = self.categories.get_mut(c) {
                let part = Batch::new(feed.to, batch.to, events);
                feed.to = batch.to;
                let _ = feed.tx.send(Feed::Events(Arc::new(part)));
            }
        }
    }
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl Hub {
    pub(crate) fn new(source: Arc<dyn Source>, capacity: usize, tail_max: usize) -> Hub {
        Hub {
            source,
            capacity: capacity.clamp(1, MAX_SUBSCRIBER_BUFFER),
            tail_max: tail_max.clamp(SUBSCRIPTION_BATCH, crate::MAX_READ_EVENTS),
            state: Mutex::new(HubState::default()),
            published: AtomicU64::new(0),
            events_published: AtomicU64::new(0),
            lagged: AtomicU64::new(0),
            subscriber_reads: AtomicU64::new(0),
            subscribers: AtomicUsize::new(0),
            watermark: AtomicU64::new(0),
            lag_micros: AtomicU64::new(u64::MAX),
        }
    }

    /// Counts a new subscription until the guard is dropped.
    pub(crate) fn enter(self: &Arc<Self>) -> SubscriberGuard {
        self.subscribers.fetch_add(1, Ordering::Relaxed);
        SubscriberGuard(self.clone())
    }

    /// `(open subscriptions, watermark, lag of the last batch in µs)`, without a lock.
    pub(crate) fn watermark_stats(&self) -> (usize, u64, Option<u64>) {
        let lag = self.lag_micros.load(Ordering::Relaxed);
        (
            self.subscribers.load(Ordering::Relaxed),
            self.watermark.load(Ordering::Relaxed),
            (lag != u64::MAX).then_some(lag),
        )
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
        let live = self.lock().receivers();
        FanoutStats {
            live_subscribers: live,
            batches_published: self.published.load(Ordering::Relaxed),
            events_published: self.events_published.load(Ordering::Relaxed),
            lagged: self.lagged.load(Ordering::Relaxed),
            subscriber_reads: self.subscriber_reads.load(Ordering::Relaxed),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A receiver of the live feed (of `category`'s events only, when given) and the position
    /// its first batch starts at; starts the tailer (at the store's head) when none runs.
    /// Errors are the head query's.
    pub(crate) async fn join(
        self: &Arc<Self>,
        category: Option<&str>,
    ) -> Result<(broadcast::Receiver<Feed>, u64)> {
        if let Some(joined) = self.lock().subscribe(category, self.capacity) {
            return Ok(joined);
        }
        let head = self.source.head().await?;
        let mut st = self.lock();
        if st.feed.is_none() {
            let (tx, _) = broadcast::channel(self.capacity);
            st.feed = Some(tx.clone());
            st.cursor = head;
            self.watermark.fetch_max(head, Ordering::Relaxed);
            tokio::spawn(tail(self.clone(), tx, head));
        }
        // The tailer runs (started here or meanwhile by another subscriber).
        st.subscribe(category, self.capacity)
            .ok_or(crate::error::Error::Closed)
    }
}

/// The tailer: reads `$all` from `cursor` on every wake-up (or poll), publishes what it read,
/// and stops when nobody listens any more.
async fn tail(hub: Arc<Hub>, tx: broadcast::Sender<Feed>, mut cursor: u64) {
    let mut wake = hub.source.wake();
    let all = EventFilter::all();
    let mut retry = RETRY_MIN;
    let mut want = SUBSCRIPTION_BATCH;
    loop {
        let whole_feed_only = {
            let mut st = hub.lock();
            if st.receivers() == 0 {
                // Under the lock a joiner takes: it either subscribed already or will start a
                // new tailer.
                st.feed = None;
                st.categories.clear();
                return;
            }
            st.categories.is_empty()
        };
        // With only the whole feed followed, stop as soon as its last receiver goes; category
        // feeds are checked after each wait (at most a poll interval).
        let nobody = async {
            if whole_feed_only {
                tx.closed().await
            } else {
                std::future::pending().await
            }
        };
        // Mark the wake-up seen *before* reading, so an append that commits after the read
        // started still wakes the wait below.
        wake.borrow_and_update();
        match hub.source.read(cursor, want, &all).await {
            Ok(events) => {
                retry = RETRY_MIN;
                let full = events.len() == want;
                // An empty read (a wake-up for nothing, the poll) says nothing of the next burst.
                if !events.is_empty() {
                    want = (events.len() * 2).clamp(SUBSCRIPTION_BATCH, hub.tail_max);
                }
                if let Some(last) = events.last() {
                    let to = last.position + 1;
                    let lag = Timestamp::now().as_micros() - last.recorded_at.as_micros();
                    hub.lag_micros
                        .store(u64::try_from(lag).unwrap_or(0), Ordering::Relaxed);
                    hub.watermark.store(to, Ordering::Relaxed);
                    let count = events.len() as u64;
                    let batch = Arc::new(Batch::new(cursor, to, events));
                    cursor = to;
                    let mut st = hub.lock();
                    st.cursor = to;
                    st.publish_categories(&batch);
                    // No receiver left is not an error: the check above ends the loop.
                    let _ = tx.send(Feed::Events(batch));
                    hub.published.fetch_add(1, Ordering::Relaxed);
                    hub.events_published.fetch_add(count, Ordering::Relaxed);
                }
                if full {
                    continue;
                }
                tokio::select! {
                    _ = wake.changed() => {}
                    _ = tokio::time::sleep(SUBSCRIPTION_POLL_INTERVAL) => {}
                    _ = nobody => {}
                }
            }
            Err(e) if e.is_transient() => {
                tracing::warn!(error = %e, retry_in = ?retry, "event fan-out read failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(retry) => {}
                    _ = nobody => {}
                }
                retry = (retry * 2).min(RETRY_MAX);
            }
            Err(e) => {
                tracing::error!(error = %e, "event fan-out stopped; subscribers read for themselves");
                let mut st = hub.lock();
                st.feed = None;
                let _ = tx.send(Feed::Failed);
                for (_, feed) in st.categories.drain() {
                    let _ = feed.tx.send(Feed::Failed);
                }
                return;
            }
        }
    }
}
