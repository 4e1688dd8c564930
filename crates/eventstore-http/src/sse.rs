//! [`EventStream`]: the server-sent events of `GET /all/subscribe` and of
//! `GET /subscriptions/{name}/events`, as chunks of bytes any server can write.
//!
//! The frames come formatted (`encode::sse_frame`) by the store's fan-out, once per live batch
//! for all subscribers, so a chunk is a list of shared buffers, not a copy. A stream opens with a
//! comment (so the client gets the response head at once), sends a keep-alive comment after each
//! interval of silence, and ends when its subscription fails (with a comment saying so), when
//! [`crate::EventsApi::shutdown`] is called, or when the server drops it (the client left).

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt as _, Stream, StreamExt as _};
use galleon_eventstore::FrameSubscription;
use tokio::sync::watch;

use crate::response::SSE_CONTENT_TYPE;

/// Most events sent in one chunk of a subscription when several are ready at once (catching up
/// from storage): one gathered write per batch instead of one per event. A guess: 64 typical
/// frames are ~40 KB, under a loopback socket buffer.
const SSE_BATCH_EVENTS: usize = 64;

/// A batch of ready events is cut once it holds this many bytes, so one chunk stays a socket
/// buffer's worth even when events are large. A guess, matching a loopback write.
const SSE_BATCH_BYTES: usize = 64 * 1024;

/// The comment sent when nothing else was for the keep-alive interval (ignored by `EventSource`).
const KEEP_ALIVE_FRAME: &[u8] = b": keep-alive\n\n";

/// What every event stream of one API shares: the shutdown signal and the count of open streams.
pub(crate) struct StreamControl {
    shutdown: watch::Sender<bool>,
    open: watch::Sender<usize>,
}

impl fmt::Debug for StreamControl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamControl")
            .field("shut_down", &*self.shutdown.borrow())
            .field("open", &*self.open.borrow())
            .finish()
    }
}

impl StreamControl {
    pub(crate) fn new() -> StreamControl {
        StreamControl {
            shutdown: watch::Sender::new(false),
            open: watch::Sender::new(0),
        }
    }

    /// Ends every open stream at its next wake-up, and every later one at once.
    pub(crate) fn shutdown(&self) {
        self.shutdown.send_replace(true);
    }

    /// Streams made and not yet dropped.
    pub(crate) fn open_streams(&self) -> usize {
        *self.open.borrow()
    }

    /// A receiver of the number of open streams.
    pub(crate) fn watch_open_streams(&self) -> watch::Receiver<usize> {
        self.open.subscribe()
    }
}

/// Counts a stream as open from its making to its drop.
struct OpenGuard(Arc<StreamControl>);

impl OpenGuard {
    fn new(control: &Arc<StreamControl>) -> OpenGuard {
        control.open.send_modify(|n| *n += 1);
        OpenGuard(control.clone())
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.open.send_modify(|n| *n -= 1);
    }
}

/// The body of an event-stream answer (`200 text/event-stream`, with [`EventStream::HEADERS`]):
/// chunks, each a list of buffers to write together (one gathered write, one HTTP chunk).
///
/// It never fails: a failing subscription ends it after a comment saying why, and an
/// `EventSource` then reconnects with `Last-Event-ID` and resumes after the last event it got.
/// Dropping it (the client left) ends the subscription behind it.
pub struct EventStream {
    chunks: Pin<Box<dyn Stream<Item = Vec<Bytes>> + Send + 'static>>,
}

impl fmt::Debug for EventStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("EventStream")
    }
}

impl Stream for EventStream {
    type Item = Vec<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Vec<Bytes>>> {
        self.chunks.as_mut().poll_next(cx)
    }
}

/// The state of one stream between chunks.
struct State {
    subscription: FrameSubscription,
    keep_alive: Duration,
    /// Set until the opening comment is sent: what it says.
    opening: Option<String>,
    /// The subscription failed or ended; the stream ends after the current chunk.
    finished: bool,
    shutdown: watch::Receiver<bool>,
    _open: OpenGuard,
}

impl EventStream {
    /// The headers of an event-stream answer besides its status (200): the content type, no
    /// caching, and no buffering by nginx (which would otherwise deliver events late).
    pub const HEADERS: [(&'static str, &'static str); 3] = [
        ("content-type", SSE_CONTENT_TYPE),
        ("cache-control", "no-cache"),
        ("x-accel-buffering", "no"),
    ];

    /// The stream of `subscription`, opening with the comment `opening`.
    pub(crate) fn new(
        subscription: FrameSubscription,
        opening: String,
        keep_alive: Duration,
        control: &Arc<StreamControl>,
    ) -> EventStream {
        let state = State {
            subscription,
            keep_alive,
            opening: Some(opening),
            finished: false,
            shutdown: control.shutdown.subscribe(),
            _open: OpenGuard::new(control),
        };
        let chunks = futures::stream::unfold(state, |mut st| async move {
            let chunk = next_chunk(&mut st).await?;
            Some((chunk, st))
        });
        EventStream {
            chunks: Box::pin(chunks),
        }
    }
}

/// The next chunk: the opening comment, a keep-alive, or the events ready now (at least one);
/// `None` once the stream is over.
async fn next_chunk(st: &mut State) -> Option<Vec<Bytes>> {
    if st.finished || *st.shutdown.borrow() {
        return None;
    }
    if let Some(opening) = st.opening.take() {
        return Some(vec![Bytes::from(format!(": {}\n\n", one_line(&opening)))]);
    }
    let first = tokio::select! {
        biased;
        _ = st.shutdown.wait_for(|stopped| *stopped) => return None,
        next = tokio::time::timeout(st.keep_alive, st.subscription.next()) => match next {
            Err(_silence) => return Some(vec![Bytes::from_static(KEEP_ALIVE_FRAME)]),
            Ok(item) => item,
        },
    };
    let mut chunk = Vec::new();
    let (mut bytes, mut frames) = (0, 0);
    let mut item = first;
    loop {
        match item {
            Some(Ok(ready)) => {
                bytes += ready.bytes.len();
                frames += ready.events;
                chunk.push(ready.bytes);
            }
            Some(Err(e)) => {
                tracing::warn!(error = %e, "event subscription failed; ending the stream");
                chunk.push(Bytes::from(format!(
                    ": subscription failed: {}\n\n",
                    one_line(&e.to_string())
                )));
                st.finished = true;
                break;
            }
            // A subscription only ends after an error, but do not rely on it.
            None => {
                st.finished = true;
                break;
            }
        }
        if frames >= SSE_BATCH_EVENTS || bytes >= SSE_BATCH_BYTES {
            break;
        }
        // Take more only if they are ready now: a live event is never held back.
        match st.subscription.next().now_or_never() {
            Some(next) => item = next,
            None => break,
        }
    }
    (!chunk.is_empty()).then_some(chunk)
}

/// `text` on one line, so it fits in an SSE comment.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_fits_one_comment_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
    }

    #[test]
    fn open_streams_are_counted_until_dropped() {
        let control = Arc::new(StreamControl::new());
        let mut watch = control.watch_open_streams();
        let a = OpenGuard::new(&control);
        let b = OpenGuard::new(&control);
        assert_eq!(control.open_streams(), 2);
        assert!(watch.has_changed().unwrap());
        drop(a);
        assert_eq!(*watch.borrow_and_update(), 1);
        drop(b);
        assert_eq!(control.open_streams(), 0);
    }
}
