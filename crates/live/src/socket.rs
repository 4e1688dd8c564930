//! The live socket's I/O: the WebSocket handshake's checks (version, key, origin, CSRF token,
//! the connection limit) and, once upgraded, the loop that reads frames into the channel
//! state, writes what it answers, delivers broadcasts, and closes the socket on a protocol
//! error, an oversized frame, a silent client, a lagging inbox or the server's shutdown.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use futures::{SinkExt, StreamExt};
use galleon_http::{Request, Response, StatusCode, Upgraded};
use tokio::io::{AsyncRead, AsyncWrite};
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

/// Longest the goodbye (a close frame) may take to write before the socket is just dropped.
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

static NEXT_SOCKET: AtomicU64 = AtomicU64::new(1);

/// Answers a request for the live socket: `101` and the socket loop, or the status saying
/// why not (426 not a WebSocket request, 400 a bad key, 403 a foreign origin or no CSRF
/// token, 503 at the connection limit).
///
/// A CSRF token that does not verify (expired, or signed before a restart with another
/// secret) still opens the socket, but every join on it is refused as `"stale"`: the client
/// acts on that by reloading the page, which brings fresh tokens. Refused at the handshake
/// instead, the client would only retry the same token forever (it never sees the status).
pub(crate) fn check(shared: &Arc<Shared>, req: &Request) -> Result<SocketUpgrade, Response> {
    if !req.wants_upgrade("websocket") {
        return Err(Response::error(
            StatusCode(426),
            "this is the live socket: open it as a WebSocket",
        )
        .with_header("upgrade", "websocket"));
    }
    if req.header_str("sec-websocket-version").map(str::trim) != Some("13") {
        return Err(
            Response::error(StatusCode(426), "only WebSocket version 13 is spoken here")
                .with_header("sec-websocket-version", "13"),
        );
    }
    let Some(key) = req.header_str("sec-websocket-key").map(str::trim) else {
        return Err(Response::error(
            StatusCode::BAD_REQUEST,
            "sec-websocket-key is missing",
        ));
    };
    if !valid_key(key) {
        return Err(Response::error(
            StatusCode::BAD_REQUEST,
            "sec-websocket-key is not 16 bytes in base64",
        ));
    }
    // The client names its serializer; only the v2 JSON arrays are spoken (v1's objects would
    // be refused frame by frame, so say it once, here).
    if let Some(vsn) = req.query_value("vsn")
        && !vsn.starts_with("2.")
    {
        return Err(Response::error(
            StatusCode::BAD_REQUEST,
            format!("serializer vsn={vsn} is not spoken here; use vsn=2.0.0"),
        ));
    }
    if !origin_allowed(shared, req) {
        return Err(refuse(
            shared,
            StatusCode::FORBIDDEN,
            "this origin may not open live sockets",
        ));
    }
    let Some(csrf) = req.query_value("_csrf_token").filter(|t| !t.is_empty()) else {
        return Err(refuse(
            shared,
            StatusCode::FORBIDDEN,
            "missing CSRF token: open the socket from a live page",
        ));
    };
    let max_age = shared.limits.token_max_age.as_secs();
    let csrf_ok = shared
        .signer
        .verify(CSRF_SALT, &csrf, max_age, now_unix_s())
        .is_ok();
    let Some(slot) = Slot::take(shared) else {
        return Err(refuse(
            shared,
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live sockets",
        )
        .with_header("retry-after", "5"));
    };
    Ok(SocketUpgrade {
        slot,
        accept: derive_accept_key(key.as_bytes()),
        stale: !csrf_ok,
    })
}

/// [`check`], then `101` and the socket loop on galleon-http's upgraded connection.
///
/// The loop runs on a task of its own, not on the connection's: an idle socket then holds
/// its ~1.4 KB future instead of the connection task (7.8 KB) and its 8 KiB read buffer
/// (`bench/results/live.txt`). So a live socket leaves galleon-http's `max_connections` and
/// shutdown grace at once; it counts under [`Limits::max_connections`](crate::Limits)
/// instead and ends itself (close 1001) when the server starts shutting down.
pub(crate) fn accept(shared: &Arc<Shared>, req: &Request) -> Response {
    let up = match check(shared, req) {
        Ok(up) => up,
        Err(refusal) => return refusal,
    };
    let accept = up.accept.clone();
    Response::upgrade(req, move |conn: Upgraded| {
        let stop = conn.stop_signal();
        let (stream, early) = conn.into_parts();
        // A copy: the read-ahead shares the connection's whole read buffer.
        let early = early.to_vec();
        tokio::spawn(up.run(stream, early, stop));
        std::future::ready(())
    })
    .with_header("upgrade", "websocket")
    .with_header("connection", "Upgrade")
    .with_header("sec-websocket-accept", accept)
}

/// A live-socket request that passed every check ([`Live::check_socket`](crate::Live)): the
/// `sec-websocket-accept` its `101` carries, and the socket loop to run once the connection is
/// upgraded. Holds its place under the connection limit until dropped or run to its end.
/// This is how another HTTP stack (axum, hyper) serves the socket.
pub struct SocketUpgrade {
    slot: Slot,
    accept: String,
    stale: bool,
}

impl std::fmt::Debug for SocketUpgrade {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketUpgrade")
            .field("accept", &self.accept)
            .finish_non_exhaustive()
    }
}

impl SocketUpgrade {
    /// The value of the `101`'s `sec-websocket-accept` header (send also `upgrade: websocket`
    /// and `connection: Upgrade`).
    pub fn accept_key(&self) -> &str {
        &self.accept
    }

    /// Runs the socket on the upgraded connection `stream` until it closes: `read_ahead` holds
    /// the bytes the client sent after the request that were already read (often none);
    /// when `stop` completes the socket says goodbye (close 1001) and returns.
    pub async fn run<S>(self, stream: S, read_ahead: Vec<u8>, stop: impl Future<Output = ()>)
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        run(self.slot, stream, read_ahead, stop, self.stale).await;
    }
}

/// A refusal of a socket that may be an attack or an overload (origin, CSRF, the limit):
/// counted in `sockets_refused`.
fn refuse(shared: &Shared, status: StatusCode, why: &'static str) -> Response {
    shared
        .counters
        .sockets_refused
        .fetch_add(1, Ordering::Relaxed);
    Response::error(status, why)
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

/// The socket's life after the upgrade; `stale`: its CSRF token did not verify.
async fn run<S>(slot: Slot, stream: S, early: Vec<u8>, stop: impl Future<Output = ()>, stale: bool)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let shared = Arc::clone(&slot.0);
    let limits = shared.limits.clone();
    let config = WebSocketConfig::default()
        .read_buffer_size(READ_BUFFER_BYTES)
        .max_message_size(Some(limits.max_message_bytes))
        .max_frame_size(Some(limits.max_message_bytes));
    let ws = WebSocketStream::from_partially_read(stream, early, Role::Server, Some(config)).await;
    let (mut sink, mut frames) = ws.split();
    let (inbox, mut deliveries, lagged) = Inbox::new();
    let id = NEXT_SOCKET.fetch_add(1, Ordering::Relaxed);
    let mut conn = Conn::new(shared, id, inbox, stale);
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
    // Our close frame, or the answer to the client's that tungstenite has queued: sent within
    // a short grace, so a peer that stopped reading cannot hold the task.
    let goodbye = async {
        if let Some(c) = close {
            let frame = CloseFrame {
                code: CloseCode::from(c.code),
                reason: c.reason.into(),
            };
            let _ = sink.send(WsMessage::Close(Some(frame))).await;
        } else {
            let _ = sink.close().await;
        }
    };
    let _ = timeout(CLOSE_GRACE, goodbye).await;
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
