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

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::broadcast;

use crate::error::Result;
use crate::fanout::{Feed, Hub, RETRY_MAX, RETRY_MIN, SUBSCRIPTION_BATCH};
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
    pub(crate) fn start(hub: Arc<Hub>, from: u64, filter: EventFilter) -> Subscription {
        let state = SubState {
            hub,
            filter,
            next: from,
            buffer: VecDeque::new(),
            mode: Mode::CatchUp,
            failed: false,
        };
        Subscription {
            inner: Box::pin(futures::stream::unfold(state, SubState::step)),
        }
    }
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
    hub: Arc<Hub>,
    filter: EventFilter,
    /// One past everything buffered or skipped: where a read of the store continues. Only
    /// consulted with the buffer empty.
    next: u64,
    buffer: VecDeque<RecordedEvent>,
    mode: Mode,
    failed: bool,
}

impl SubState {
    async fn step(mut self) -> Option<(Result<RecordedEvent>, SubState)> {
        if self.failed {
            return None;
        }
        let mut retry = RETRY_MIN;
        loop {
            if let Some(event) = self.buffer.pop_front() {
                return Some((Ok(event), self));
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
        self.buffer.extend(events);
        if short {
            let (rx, bound) = self.hub.join().await?;
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
        self.buffer.extend(events);
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
                self.buffer.extend(
                    batch
                        .events
                        .iter()
                        .filter(|e| e.position >= next && self.filter.matches(e))
                        .cloned(),
                );
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
