//! Server-sent events of a [`FrameSubscription`]: the body of `GET /all/subscribe` and of
//! `GET /subscriptions/{name}/events`. The frames come formatted ([`api::sse_frame`]) by the
//! store's fan-out, once per live batch for all subscribers, so a chunk is shared bytes.

use std::time::Duration;

use bytes::Bytes;
use futures::{FutureExt as _, Stream, StreamExt as _};
use galleon_eventstore::{FrameSubscription, api};
use galleon_http::{Body, BoxError, IoList, Response, StatusCode};

/// Most events sent in one chunk of a subscription when several are ready at once (catching up
/// from storage): one gathered write per batch instead of one per event. A guess: 64 typical
/// frames are ~40 KB, under a loopback socket buffer.
const SSE_BATCH_EVENTS: usize = 64;

/// A batch of ready events is cut once it holds this many bytes, so one chunk stays a socket
/// buffer's worth even when events are large. A guess, matching a loopback write.
const SSE_BATCH_BYTES: usize = 64 * 1024;

/// The comment sent when nothing else was for the keep-alive interval (ignored by `EventSource`).
const KEEP_ALIVE_FRAME: &[u8] = b": keep-alive\n\n";

/// The state of one subscription's body stream.
struct Sse {
    subscription: FrameSubscription,
    keep_alive: Duration,
    /// Set until the opening comment is sent: what it says.
    opening: Option<String>,
    /// The subscription failed or ended; the stream ends after the current chunk.
    finished: bool,
}

/// The body of a subscription: an opening comment (so the client gets the response head at
/// once, before any event), then one chunk per batch of ready events, or a keep-alive comment
/// after `keep_alive` without one. Ends when the subscription fails, with a comment saying so; an
/// `EventSource` then reconnects with `Last-Event-ID` and resumes after the last event it got.
fn sse_stream(
    subscription: FrameSubscription,
    opening: String,
    keep_alive: Duration,
) -> impl Stream<Item = Result<IoList, BoxError>> + Send + 'static {
    let state = Sse {
        subscription,
        keep_alive,
        opening: Some(opening),
        finished: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.finished {
            return None;
        }
        if let Some(opening) = st.opening.take() {
            let hello = format!(": {}\n\n", one_line(&opening));
            return Some((Ok(IoList::from(hello)), st));
        }
        let first = match tokio::time::timeout(st.keep_alive, st.subscription.next()).await {
            Err(_silence) => {
                let mut chunk = IoList::new();
                chunk.push_static(KEEP_ALIVE_FRAME);
                return Some((Ok(chunk), st));
            }
            Ok(item) => item,
        };
        let mut chunk = IoList::new();
        let mut item = first;
        let mut frames = 0;
        loop {
            match item {
                Some(Ok(ready)) => {
                    chunk.push_bytes(ready.bytes);
                    frames += ready.events;
                }
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "event subscription failed; ending the stream");
                    chunk.push_bytes(Bytes::from(format!(
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
            if frames >= SSE_BATCH_EVENTS || chunk.len() >= SSE_BATCH_BYTES {
                break;
            }
            // Take more only if they are ready now: a live event is never held back.
            match st.subscription.next().now_or_never() {
                Some(next) => item = next,
                None => break,
            }
        }
        if chunk.is_empty() {
            return None;
        }
        Some((Ok(chunk), st))
    })
}

/// `text` on one line, so it fits in an SSE comment.
fn one_line(text: &str) -> String {
    text.replace(['\r', '\n'], " ")
}

/// A `200 text/event-stream` response streaming `subscription`, opening with the comment
/// `opening` (so the client gets the head at once, before any event).
pub(super) fn sse_response(
    subscription: FrameSubscription,
    opening: String,
    keep_alive: Duration,
) -> Response {
    let events = sse_stream(subscription, opening, keep_alive);
    Response::new(StatusCode::OK, Body::stream(events))
        .with_header("content-type", api::SSE_CONTENT_TYPE)
        .with_header("cache-control", "no-cache")
        // nginx would otherwise buffer the stream and deliver events late.
        .with_header("x-accel-buffering", "no")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_fits_one_comment_line() {
        assert_eq!(one_line("a\nb\r\nc"), "a b  c");
    }
}
