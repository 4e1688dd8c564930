//! The live socket's I/O: the WebSocket handshake's checks (version, key, origin, CSRF token,
//! the connection limit) and, once upgraded, the loop that reads frames into the channel
//! state, writes what it answers, delivers broadcasts, and closes the socket on a protocol
//! error, an oversized frame, a silent client, a lagging inbox or the server's shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures::{SinkExt, StreamExt};
use galleon_http::{Request, Response, StatusCode, Upgraded};
use tokio::time::{sleep_until, timeout};
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::{Error as WsError, Message as WsMessage};

use crate::channel::{Close, Conn};
use crate::pubsub::Inbox;
use crate::shared::{CSRF_SALT, Shared, now_unix_s};

/// Read buffer of a socket: small, as most sockets are idle and frames from the client are
/// events of a few hundred bytes (tungstenite's default, 128 KiB, is allocated up front, and
/// each read zero-fills it, so all of it is resident). A larger frame grows it to fit, read at
/// most this much per read call. 1 KiB rather than 4 took 3 KiB off each idle view's RSS
/// (`cargo bench -p galleon-live --bench live`, part 3).
const READ_BUFFER_BYTES: usize = 1024;

static NEXT_SOCKET: AtomicU64 = AtomicU64::new(1);

/// Answers a request for the live socket: `101` and the socket loop, or the status saying
/// why not (426 not a WebSocket request, 400 a bad key, 403 a foreign origin or a missing or
/// stale CSRF token, 503 at the connection limit).
pub(crate) fn accept(shared: &Arc<Shared>, req: &Request) -> Response {
    if !req.wants_upgrade("websocket") {
        return Response::error(
            StatusCode(426),
            "this is the live socket: open it as a WebSocket",
        )
        .with_header("upgrade", "websocket");
    }
    if req.header_str("sec-websocket-version").map(str::trim) != Some("13") {
        return Response::error(StatusCode(426), "only WebSocket version 13 is spoken here")
            .with_header("sec-websocket-version", "13");
    }
    let Some(key) = req.header_str("sec-websocket-key").map(str::trim) else {
        return Response::error(StatusCode::BAD_REQUEST, "sec-websocket-key is missing");
    };
    if !valid_key(key) {
        return Response::error(
            StatusCode::BAD_REQUEST,
            "sec-websocket-key is not 16 bytes in base64",
        );
    }
    if !origin_allowed(shared, req) {
        shared
            .counters
            .sockets_refused
            .fetch_add(1, Ordering::Relaxed);
        return Response::error(
            StatusCode::FORBIDDEN,
            "this origin may not open live sockets",
        );
    }
    let csrf = req.query_value("_csrf_token");
    let max_age = shared.limits.token_max_age.as_secs();
    let csrf_ok = csrf.is_some_and(|t| {
        shared
            .signer
            .verify(CSRF_SALT, &t, max_age, now_unix_s())
            .is_ok()
    });
    if !csrf_ok {
        shared
            .counters
            .sockets_refused
            .fetch_add(1, Ordering::Relaxed);
        return Response::error(
            StatusCode::FORBIDDEN,
            "missing or stale CSRF token: reload the page",
        );
    }
    let Some(slot) = Slot::take(shared) else {
        shared
            .counters
            .sockets_refused
            .fetch_add(1, Ordering::Relaxed);
        return Response::error(StatusCode::SERVICE_UNAVAILABLE, "too many live sockets")
            .with_header("retry-after", "5");
    };
    let accept = derive_accept_key(key.as_bytes());
    Response::upgrade(req, move |up| run(slot, up))
        .with_header("upgrade", "websocket")
        .with_header("connection", "Upgrade")
        .with_header("sec-websocket-accept", accept)
}

/// A place under `max_connections`, given back when dropped.
struct Slot(Arc<Shared>);

impl Slot {
    fn take(shared: &Arc<Shared>) -> Option<Slot> {
        let open = &shared.counters.sockets_open;
        let max = shared.limits.max_connections;
        open.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()?;
        Some(Slot(Arc::clone(shared)))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.counters.sockets_open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A `sec-websocket-key`: 16 bytes in standard base64 (24 characters).
fn valid_key(key: &str) -> bool {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(key)
        .is_ok_and(|k| k.len() == 16)
}

/// No `origin` (not a browser), the request's own host, or one of the allowed origins.
fn origin_allowed(shared: &Shared, req: &Request) -> bool {
    let Some(origin) = req.header_str("origin").map(str::trim) else {
        return true;
    };
    if shared
        .origins
        .iter()
        .any(|o| o.eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let host = origin.split_once("://").map_or("", |(_, h)| h);
    req.header_str("host")
        .is_some_and(|h| h.trim().eq_ignore_ascii_case(host))
}

/// The socket's life after the upgrade.
async fn run(slot: Slot, up: Upgraded) {
    let shared = Arc::clone(&slot.0);
    let limits = shared.limits.clone();
    let stop = up.stop_signal();
    let (stream, early) = up.into_parts();
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_message_bytes));
    let ws =
        WebSocketStream::from_partially_read(stream, early.to_vec(), Role::Server, Some(config))
            .await;
    let (mut sink, mut frames) = ws.split();
    let (inbox, mut deliveries, lagged) = Inbox::new();
    let id = NEXT_SOCKET.fetch_add(1, Ordering::Relaxed);
    let mut conn = Conn::new(shared, id, inbox);
    let opened = Instant::now();
    let mut heard = opened;
    let mut joined = false;
    let mut out = Vec::new();
    tokio::pin!(stop);
    let close = loop {
        let deadline = if joined {
            heard + limits.idle_timeout
        } else {
            (opened + limits.join_timeout).min(heard + limits.idle_timeout)
        };
        tokio::select! {
            () = &mut stop => break Some(Close::new(1001, "the server is shutting down")),
            () = sleep_until(deadline.into()) => {
                break Some(Close::policy(if joined { "no frame within the idle timeout" }
                    else { "no join within the join timeout" }));
            }
            () = lagged.wait() => break Some(Close::new(1013, "too slow to keep up: rejoin")),
            d = deliveries.recv() => {
                // The socket holds a sender (its `Conn`), so the inbox never closes first.
                let Some(d) = d else { break None };
                conn.deliver(d, &mut out);
            }
            frame = frames.next() => match frame {
                Some(Ok(WsMessage::Text(text))) => {
                    heard = Instant::now();
                    if let Err(close) = conn.text(&text, heard, &mut out) {
                        break Some(close);
                    }
                    joined |= conn.views() > 0;
                }
                Some(Ok(WsMessage::Binary(_))) => {
                    break Some(Close::new(1003, "binary frames are not spoken here"));
                }
                Some(Ok(WsMessage::Close(_))) | None => break None,
                Some(Ok(_)) => heard = Instant::now(), // Ping, pong: answered by tungstenite.
                Some(Err(WsError::Capacity(_))) => {
                    break Some(Close::new(1009, "message too big"));
                }
                Some(Err(_)) => break None,
            },
        }
        if !out.is_empty() && !write(&mut sink, &mut out, &limits).await {
            break None;
        }
    };
    drop(conn);
    if let Some(c) = close {
        let frame = CloseFrame {
            code: CloseCode::from(c.code),
            reason: c.reason.into(),
        };
        let _ = timeout(
            limits.idle_timeout,
            sink.send(WsMessage::Close(Some(frame))),
        )
        .await;
    }
    drop(slot);
}

/// Writes the frames in `out` (one flush for all), clearing it; false when the socket failed or
/// made no progress for the idle timeout.
async fn write<S>(sink: &mut S, out: &mut Vec<String>, limits: &crate::Limits) -> bool
where
    S: futures::Sink<WsMessage, Error = WsError> + Unpin,
{
    let mut frames = futures::stream::iter(out.drain(..).map(|f| Ok(WsMessage::text(f))));
    matches!(
        timeout(limits.idle_timeout, sink.send_all(&mut frames)).await,
        Ok(Ok(()))
    )
}
