//! [`Subscription`]: `$all` (or the part of it a filter selects), stored events first, then live
//! ones from the store's fan-out (`fanout.rs`), each exactly once, in increasing position.
//!
//! A subscription is in one of three modes:
//! - *catching up*: it reads the store itself from its cursor, [`SUBSCRIPTION_BATCH`] events
//!   at a time, until a read comes back short (it has reached the end of what is final);
//! - *bridging*: it has joined the live feed, whose first batch starts at position `bound`, and
//!   reads `[cursor, bound)` from the store while the feed's batches wait in the ring;
//! - *live*: it takes the feed's batches, skipping what it has seen and what its filter
//!   rejects. A batch that does not start at or before its cursor, a lag (it fell more than the
//!   ring behind) or a failed tailer sends it back to catching up.
//!
//! A [`FrameSubscription`] is the same with each event already formatted (an SSE frame): live
//! batches are formatted once, by the first subscriber that reaches them, and every subscriber
//! shares the bytes (an unfiltered one gets the rest of a batch as one slice).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use tokio::sync::broadcast;

use crate::error::Result;
use crate::fanout::{
    Feed, FrameFormat, Hub, RETRY_MAX, RETRY_MIN, SUBSCRIPTION_BATCH, SubscriberGuard,
};
use crate::filter::EventFilter;
use crate::types::RecordedEvent;

/// A live stream of `$all` events, from [`crate::Store::subscribe_all`] or
/// [`crate::Store::subscribe`].
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

impl Subscription {
    /// Wraps another stream of events (a consumer-group member's) as a subscription.
    pub(crate) fn from_stream(
        stream: impl Stream<Item = Result<RecordedEvent>> + Send + 'static,
    ) -> Subscription {
        Subscription {
            inner: Box::pin(stream),
        }
    }

    pub(crate) fn start(hub: Arc<Hub>, from: u64, filter: EventFilter) -> Subscription {
        let items = SubState::stream(hub, from, filter, None);
        // Without a format no item is frames: nothing is dropped.
        let events = items.filter_map(|item| {
            std::future::ready(match item {
                Ok(Item::Event(e)) => Some(Ok(e)),
                Ok(Item::Frames(_)) => None,
                Err(e) => Some(Err(e)),
            })
        });
        Subscription {
            inner: Box::pin(events),
        }
    }

    /// This subscription's events formatted by `format`, one [`Frames`] per event.
    pub fn into_frames(self, format: FrameFormat) -> FrameSubscription {
        FrameSubscription {
            inner: Box::pin(self.map(move |r| r.map(|e| Frames::of(&e, format)))),
        }
    }
}

/// Events formatted for writing (SSE frames), back to back: what a [`FrameSubscription`]
/// yields.
#[derive(Debug, Clone)]
pub struct Frames {
    /// The frames.
    pub bytes: Bytes,
    /// How many events they hold.
    pub events: usize,
    /// The position of the last of them.
    pub last_position: u64,
}

impl Frames {
    fn of(e: &RecordedEvent, format: FrameFormat) -> Frames {
        Frames {
            bytes: format(e),
            events: 1,
            last_position: e.position,
        }
    }
}

/// A [`Subscription`] whose events come formatted ([`crate::Store::subscribe_frames`]): the
/// same events, once each, in increasing position, as [`Frames`]. Live events are formatted
/// once per store handle, not once per subscriber.
#[must_use = "a subscription does nothing unless polled"]
pub struct FrameSubscription {
    inner: Pin<Box<dyn Stream<Item = Result<Frames>> + Send>>,
}

impl std::fmt::Debug for FrameSubscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FrameSubscription").finish_non_exhaustive()
    }
}

impl Stream for FrameSubscription {
    type Item = Result<Frames>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.inner.as_mut().poll_next(cx)
    }
}

impl FrameSubscription {
    pub(crate) fn start(
        hub: Arc<Hub>,
        from: u64,
        filter: EventFilter,
        format: FrameFormat,
    ) -> FrameSubscription {
        let items = SubState::stream(hub, from, filter, Some(format));
        let frames = items.map(move |item| {
            item.map(|item| match item {
                Item::Event(e) => Frames::of(&e, format),
                Item::Frames(f) => f,
            })
        });
        FrameSubscription {
            inner: Box::pin(frames),
        }
    }
}

/// What a subscription's state machine yields: an event, or (with a format) frames.
enum Item {
    Event(RecordedEvent),
    Frames(Frames),
}

enum Mode {
    CatchUp,
    Bridge {
        rx: broadcast::Receiver<Feed>,
        bound: u64,
    },
    Live {
        rx: broadcast::Receiver<Feed>,
    },
}

struct SubState {
    /// Counts this subscription in the store's stats while it is open.
    _counted: SubscriberGuard,
    hub: Arc<Hub>,
    filter: EventFilter,
    /// One past everything buffered or skipped: where a read of the store continues. Only
    /// consulted with the buffer empty.
    next: u64,
    buffer: VecDeque<Item>,
    mode: Mode,
    failed: bool,
    /// Set for a [`FrameSubscription`]: live batches become shared frames.
    format: Option<FrameFormat>,
}

impl SubState {
    fn stream(
        hub: Arc<Hub>,
        from: u64,
        filter: EventFilter,
        format: Option<FrameFormat>,
    ) -> impl Stream<Item = Result<Item>> + Send + 'static {
        let state = SubState {
            _counted: hub.enter(),
            hub,
            filter,
            next: from,
            buffer: VecDeque::new(),
            mode: Mode::CatchUp,
            failed: false,
            format,
        };
        futures::stream::unfold(state, SubState::step)
    }

    async fn step(mut self) -> Option<(Result<Item>, SubState)> {
        if self.failed {
            return None;
        }
        let mut retry = RETRY_MIN;
        loop {
            if let Some(item) = self.buffer.pop_front() {
                return Some((Ok(item), self));
            }
            let outcome = match std::mem::replace(&mut self.mode, Mode::CatchUp) {
                Mode::CatchUp => self.catch_up().await,
                Mode::Bridge { rx, bound } => self.bridge(rx, bound).await,
                Mode::Live { rx } => {
                    self.live(rx).await;
                    Ok(())
                }
            };
            match outcome {
                Ok(()) => retry = RETRY_MIN,
                Err(e) if e.is_transient() => {
                    tracing::warn!(error = %e, retry_in = ?retry, "subscription read failed; retrying");
                    tokio::time::sleep(retry).await;
                    retry = (retry * 2).min(RETRY_MAX);
                }
                Err(e) => {
                    self.failed = true;
                    return Some((Err(e), self));
                }
            }
        }
    }

    /// Reads the store from the cursor; after a short read, joins the live feed.
    async fn catch_up(&mut self) -> Result<()> {
        self.hub.note_read();
        let events = self
            .hub
            .source()
            .read(self.next, SUBSCRIPTION_BATCH, &self.filter)
            .await?;
        let short = events.len() < SUBSCRIPTION_BATCH;
        if let Some(last) = events.last() {
            self.next = last.position + 1;
        }
        self.buffer.extend(events.into_iter().map(Item::Event));
        if short {
            let (rx, bound) = self.hub.join(self.filter.category_name()).await?;
            self.mode = if self.next >= bound {
                Mode::Live { rx }
            } else {
                Mode::Bridge { rx, bound }
            };
        }
        Ok(())
    }

    /// Reads `[next, bound)` from the store, then goes live.
    async fn bridge(&mut self, rx: broadcast::Receiver<Feed>, bound: u64) -> Result<()> {
        self.hub.note_read();
        let read = self
            .hub
            .source()
            .read(self.next, SUBSCRIPTION_BATCH, &self.filter)
            .await;
        let mut events = match read {
            Ok(events) => events,
            Err(e) => {
                // Keep the receiver: the feed's batches are still wanted after the retry.
                self.mode = Mode::Bridge { rx, bound };
                return Err(e);
            }
        };
        // Everything below `bound` is final, so a short read has all of `[next, bound)`.
        let done =
            events.len() < SUBSCRIPTION_BATCH || events.last().is_some_and(|e| e.position >= bound);
        events.retain(|e| e.position < bound);
        if let Some(last) = events.last() {
            self.next = last.position + 1;
        }
        self.buffer.extend(events.into_iter().map(Item::Event));
        self.mode = if done {
            self.next = self.next.max(bound);
            Mode::Live { rx }
        } else {
            Mode::Bridge { rx, bound }
        };
        Ok(())
    }

    /// Takes the next batch of the live feed.
    async fn live(&mut self, mut rx: broadcast::Receiver<Feed>) {
        match rx.recv().await {
            Ok(Feed::Events(batch)) if batch.from <= self.next => {
                let next = self.next;
                let start = batch.events.partition_point(|e| e.position < next);
                let fresh = &batch.events[start..];
                match self.format {
                    None => self.buffer.extend(
                        fresh
                            .iter()
                            .filter(|e| self.filter.matches(e))
                            .cloned()
                            .map(Item::Event),
                    ),
                    Some(format) if !fresh.is_empty() => {
                        let frames = batch.frames(format);
                        let (bytes, at) = (&frames.bytes, &frames.offsets);
                        if self.filter.is_all() {
                            // The rest of the batch, one shared slice.
                            self.buffer.push_back(Item::Frames(Frames {
                                bytes: bytes.slice(at[start]..),
                                events: fresh.len(),
                                last_position: fresh[fresh.len() - 1].position,
                            }));
                        } else {
                            for (i, e) in fresh.iter().enumerate() {
                                if self.filter.matches(e) {
                                    let i = start + i;
                                    self.buffer.push_back(Item::Frames(Frames {
                                        bytes: bytes.slice(at[i]..at[i + 1]),
                                        events: 1,
                                        last_position: e.position,
                                    }));
                                }
                            }
                        }
                    }
                    Some(_) => {}
                }
                self.next = self.next.max(batch.to);
                self.mode = Mode::Live { rx };
            }
            // A hole between the cursor and the batch cannot happen by the join rule; if it
            // did, reading the store is still right.
            Ok(Feed::Events(_)) | Ok(Feed::Failed) | Err(broadcast::error::RecvError::Closed) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => self.hub.note_lagged(),
        }
    }
}
