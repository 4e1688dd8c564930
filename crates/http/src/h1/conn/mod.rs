//! One connection: read a head, read its body, run the handler, write the response; repeat while
//! the connection is kept alive. Requests are answered strictly in order, so pipelined requests
//! simply wait in the read buffer.
//!
//! Every wait has a timeout (`timed`: one lazy timer per connection, armed only when an operation
//! would wait) and every size a limit (`config.rs`). A request body must arrive whole within
//! `body_read_timeout` and fit the budget all connections share (`max_buffered_body_bytes`; 503
//! before it is read), held until its response is written. A streamed body or a large file hands
//! the whole connection to the bulk writers for that response (`for_bulk`, `in_bulk`).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::Poll;

use bytes::{Bytes, BytesMut};
use futures::FutureExt;
use futures::future::{BoxFuture, Fuse};
use galleon_iolist::{IoList, IoWriter, WritePolicy, WriteStats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep, sleep_until, timeout, timeout_at};

mod batch;
mod respond;
mod upgrade;

use super::chunks::ChunkPool;
use super::decode::{
    BodyFraming, ChunkProgress, ChunkedDecoder, HeadError, Refusal, body_framing, check_host,
    expects_continue, parse_head, wants_keep_alive,
};
use super::encode::{Framing, KeepAlive, write_head};
use crate::config::ServerConfig;
use crate::observe::{Exchange, Observer};
use crate::request::{Method, Request};
use crate::response::{BodyKind, Response, StatusCode};
use crate::router::Router;
use crate::trace::{ConnTracer, ResponseTrace, TRACE_HEADER, TraceStore, valid_token};

/// Initial read buffer per connection: 8 KiB, hyper's `INIT_BUFFER_SIZE`; a typical request head
/// is 200-800 bytes, so pipelined requests fit several to a read.
const INIT_READ_BUF: usize = 8 * 1024;

/// Most bytes reserved at once while reading a body, so a client's `content-length` claim does
/// not make us allocate its full size before the bytes arrive. 64 KiB: one loopback read.
const BODY_READ_CHUNK: usize = 64 * 1024;

/// After an error response the connection is half-closed and the client's unread bytes are
/// drained for up to this long, so the kernel does not answer them with a reset that destroys
/// the response before the client reads it (what hyper and nginx's `lingering_close` do).
const LINGER_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(500);

/// Most bytes drained while lingering (nginx drains without a byte limit but with a 5 s timer;
/// 256 KiB is a large unread body's worth on loopback).
const LINGER_MAX_BYTES: usize = 256 * 1024;

/// What the connection shares with the server and every other connection.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) router: Router,
    pub(crate) config: ServerConfig,
    /// Where responses to requests carrying [`TRACE_HEADER`] are recorded; `None`: not traced.
    pub(crate) traces: Option<TraceStore>,
    /// Set when the server starts shutting down, before the connections are told.
    pub(crate) stopping: AtomicBool,
    /// Request body bytes all connections hold now, against `max_buffered_body_bytes`.
    pub(crate) buffered_body_bytes: AtomicU64,
    /// Where streamed bodies' chunks are computed; `None`: tokio's blocking pool.
    pub(crate) chunk_pool: Option<ChunkPool>,
    /// Where streamed bodies and large files are written, once the server runs; unset: on the
    /// request workers ([`ServerConfig::bulk_writers`] 0).
    pub(crate) bulk: OnceLock<tokio::runtime::Handle>,
    /// Told of every answered request and every connection; `None`: nothing is measured.
    pub(crate) observer: Option<Arc<dyn Observer>>,
}

impl Shared {
    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }
}

/// How reading a request failed.
#[derive(Debug)]
enum Fail {
    /// Answer with this status, then close.
    Status(StatusCode, &'static str),
    /// The client went away or the socket failed: just close.
    Close,
}

struct Conn {
    /// The connection's one timer, shared by all its waits (see [`timed`]).
    timer: Pin<Box<Sleep>>,
    /// Completes when the server starts shutting down (fused: then pending for good). Polled
    /// once at the start, which registers this task for the wake-up; idle reads then check
    /// [`Shared::stopping`] whenever the task is woken.
    stop: Fuse<BoxFuture<'static, ()>>,
    stream: TcpStream,
    /// The server's shutdown signal, for a connection that is upgraded ([`Upgraded::stopping`]).
    ///
    /// [`Upgraded::stopping`]: crate::Upgraded::stopping
    shutdown: watch::Receiver<bool>,
    buf: BytesMut,
    writer: IoWriter,
    msg: IoList,
    fd: i32,
    peer: SocketAddr,
    sink: Option<Arc<Mutex<Option<ResponseTrace>>>>,
    shared: Arc<Shared>,
    /// The server's request-body budget the current request holds.
    body_held: BodyHeld,
    /// When the last exchange ended, if the observer read the clock then: the start of the
    /// idle wait that follows, so that wait's deadline needs no clock read of its own.
    idle_from: Option<Instant>,
    /// The last response's status and write calls (for the observer).
    last_status: u16,
    last_writes: WriteStats,
    /// The socket's bound on unsent bytes ([`Limits::stream_unsent_bytes`]), made at the
    /// connection's first streamed body or file.
    ///
    /// [`Limits::stream_unsent_bytes`]: crate::Limits::stream_unsent_bytes
    unsent: Option<super::unsent::UnsentBound>,
    /// Responses to pipelined requests waiting to go out together (`batch.rs`).
    batch: batch::Batch,
}

/// Tells the observer a connection ended, however its task ends (also when aborted).
struct Closed(Option<Arc<dyn Observer>>);

impl Drop for Closed {
    fn drop(&mut self) {
        if let Some(o) = &self.0 {
            o.connection(false);
        }
    }
}

/// Serves one connection until it closes, the client misbehaves, or the server shuts down.
pub(crate) async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    shutdown: watch::Receiver<bool>,
) {
    let mut stop_rx = shutdown.clone();
    let stop = async move {
        let _ = stop_rx.wait_for(|stopping| *stopping).await;
    }
    .boxed()
    .fuse();
    let _ = stream.set_nodelay(true);
    let fd = stream.as_raw_fd();
    let mut writer = IoWriter::new(shared.config.write_policy);
    let mut sink = None;
    if shared.config.trace_writes || shared.traces.is_some() {
        let (tracer, s) = ConnTracer::new(fd, shared.config.trace_writes);
        writer.set_tracer(Some(Box::new(tracer)));
        sink = Some(s);
    }
    let first_deadline = Instant::now() + shared.config.limits.header_read_timeout;
    if let Some(o) = &shared.observer {
        o.connection(true);
    }
    let _closed = Closed(shared.observer.clone());
    let mut conn = Conn {
        timer: Box::pin(sleep_until(first_deadline)),
        stop,
        stream,
        shutdown,
        buf: BytesMut::with_capacity(INIT_READ_BUF),
        writer,
        msg: IoList::new(),
        fd,
        peer,
        sink,
        shared: Arc::clone(&shared),
        body_held: BodyHeld { bytes: 0, shared },
        idle_from: None,
        last_status: 0,
        last_writes: WriteStats::default(),
        unsent: None,
        batch: batch::Batch::default(),
    };
    // Registers the stop future's wake-up with this task once; idle waits then check the
    // `stopping` flag when woken instead of polling the future (a lock) every time.
    let _ = futures::poll!(&mut conn.stop);
    let mut first = true;
    while let Some(pending) = conn.run(first).await {
        first = false;
        // Never for the bulk writers: an upgraded connection stays on its own task.
        if matches!(pending.resp.body().kind, BodyKind::Upgrade(_)) {
            conn.upgrade(pending).await;
            return;
        }
        match conn.in_bulk(pending).await {
            Some(back) => conn = back,
            None => return,
        }
    }
}

/// Runs `op` until it completes (`Some`) or `deadline` passes (`None`), on the connection's
/// `timer`.
///
/// Per-request timers showed in profiles of small responses (a timer-wheel insert and removal
/// and a clock read per wait), so the timer is lazy: `op` is first polled without it, so an
/// operation that completes at once (the socket takes the whole response) never touches it;
/// a deadline later than the one armed is not re-armed until the armed one fires, and only
/// then, if `deadline` has not passed, is it moved. A connection busy with requests re-arms
/// its timer about once per timeout instead of twice per request.
///
/// `op` is pinned by the caller, where it was made: moved into this future instead, a write's
/// state (a few hundred bytes) was copied once more per response.
async fn timed<F: Future>(
    timer: &mut Pin<Box<Sleep>>,
    deadline: impl FnOnce() -> Instant,
    mut op: Pin<&mut F>,
) -> Option<F::Output> {
    if let Poll::Ready(v) = futures::poll!(op.as_mut()) {
        return Some(v);
    }
    // Only now is the deadline needed (for a write, a clock read saved per response).
    let deadline = deadline();
    if timer.deadline() > deadline {
        timer.as_mut().reset(deadline);
    }
    // `op` was just polled with this task's waker and is pending, so it will wake the task when
    // it can progress: the first round below polls only the timer. Polling `op` again at once
    // (as a `select!` would) cost a second futile poll of an idle read on every request.
    let mut op_pending = true;
    std::future::poll_fn(|cx| {
        if !std::mem::take(&mut op_pending)
            && let Poll::Ready(v) = op.as_mut().poll(cx)
        {
            return Poll::Ready(Some(v));
        }
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= deadline {
                return Poll::Ready(None);
            }
            timer.as_mut().reset(deadline);
        }
        Poll::Pending
    })
    .await
}

/// When a request was read, its method and target: what the observer is told with its answer.
type Observed = (Instant, Method, Option<bytestring::ByteString>);

/// A response for the bulk writers, with what its exchange reports once it is written.
struct Pending {
    resp: Response,
    head_only: bool,
    minor: u8,
    keep: bool,
    token: Option<String>,
    label: Option<String>,
    observed: Option<Observed>,
    route: Option<usize>,
}

impl Conn {
    /// Serves requests until the connection ends (`None`) or a response is for the bulk writers
    /// (`Some`): the caller has it written there, then calls again with `first` false.
    async fn run(&mut self, first: bool) -> Option<Pending> {
        let mut first = first;
        loop {
            let req = match self.read_head(first).await {
                Ok(Some(r)) => r,
                Ok(None) => return None,
                Err(f) => {
                    self.fail(f).await;
                    return None;
                }
            };
            first = false;
            // What the observer is told, taken before the handler owns the request.
            let observed = self.shared.observer.as_ref().map(|o| {
                (
                    Instant::now(),
                    req.method().clone(),
                    o.wants_target().then(|| req.target_string()),
                )
            });
            let mut req = req;
            // The body's share of the server's budget is held until its response is written.
            match self.read_body(&req).await {
                Ok(b) => req.set_body(b),
                Err(f) => {
                    self.fail(f).await;
                    return None;
                }
            }
            if let Err(refusal) = check_host(&req) {
                self.fail(refusal.into()).await;
                return None;
            }
            let wants_keep_alive = wants_keep_alive(&req);
            let head_only = *req.method() == Method::Head;
            let minor = req.minor_version();
            let token = if self.shared.traces.is_some() {
                req.header(TRACE_HEADER)
                    .filter(|t| valid_token(t))
                    .map(|t| String::from_utf8_lossy(t).into_owned())
            } else {
                None
            };
            let label = token
                .as_ref()
                .map(|_| format!("{} {}", req.method(), req.target()));
            // A policy the client asked for (bench comparisons), when the server allows it.
            let asked = self
                .shared
                .config
                .policy_header
                .and_then(|h| req.header_str(h))
                .and_then(|v| v.trim().parse::<WritePolicy>().ok());
            // A span per request for subscribers that want one (`RUST_LOG=galleon_http=debug`);
            // disabled, it is one cached interest check.
            let span = tracing::debug_span!(
                "request",
                method = req.method().as_str(),
                target = req.target()
            );
            let (mut resp, route) = if self.batch.pending() {
                // Answers waiting in the batch do not wait for a handler that is not ready at
                // once (a slow page, an offloaded render): they go out first.
                let shared = Arc::clone(&self.shared);
                let routed = shared.router.handle_routed(req);
                let mut routed = std::pin::pin!(tracing::Instrument::instrument(routed, span));
                match futures::poll!(routed.as_mut()) {
                    Poll::Ready(answer) => answer,
                    Poll::Pending => {
                        if self.flush_batch().await.is_err() {
                            return None;
                        }
                        routed.await
                    }
                }
            } else {
                let routed = self.shared.router.handle_routed(req);
                tracing::Instrument::instrument(routed, span).await
            };
            if let Some(p) = asked {
                resp = resp.with_policy(p);
            }
            let keep = wants_keep_alive && !self.shared.stopping();
            if self.batchable(&resp, &token) && (self.batch.pending() || self.more_behind(keep)) {
                self.queue(resp, head_only, minor, keep, observed, route);
                if self.more_behind(keep) && !self.batch_full() {
                    continue;
                }
                match self.flush_batch().await {
                    Ok(()) if keep => continue,
                    Ok(()) => {
                        self.linger().await;
                        return None;
                    }
                    Err(()) => return None,
                }
            }
            // Whatever else is written or awaited goes after the responses before it.
            if self.batch.pending() && self.flush_batch().await.is_err() {
                return None;
            }
            if self.for_bulk(&resp, head_only) {
                return Some(Pending {
                    resp,
                    head_only,
                    minor,
                    keep,
                    token,
                    label,
                    observed,
                    route,
                });
            }
            let written = self
                .write_response(resp, head_only, minor, keep, token, label)
                .await;
            match self.end_exchange(written, observed, route) {
                Ok(true) => {}
                Ok(false) => {
                    self.linger().await;
                    return None;
                }
                Err(()) => return None,
            }
        }
    }

    /// Whether the bulk writers should send this response: a body of unknown length (a
    /// streamed page, an event stream) or a file of at least
    /// [`ServerConfig::bulk_file_bytes`](crate::ServerConfig::bulk_file_bytes), when the server
    /// has bulk writers. Also true for an upgrade, so the one arm for whole bodies stays the
    /// only test on the common path; `serve_connection` then upgrades instead.
    fn for_bulk(&self, resp: &Response, head_only: bool) -> bool {
        let big = match &resp.body().kind {
            BodyKind::Full(_) => return false,
            BodyKind::File(_, _, n) => *n >= self.shared.config.bulk_file_bytes,
            BodyKind::Stream(_) | BodyKind::Iter(_) => true,
            // Not for the bulk writers: `serve_connection` takes it out of their way.
            BodyKind::Upgrade(_) => return true,
        };
        big && !head_only && !resp.status().is_bodiless() && self.shared.bulk.get().is_some()
    }

    /// Writes a response the bulk writers were given and ends its exchange; whether the
    /// connection goes on to its next request.
    async fn exchange(&mut self, p: Pending) -> bool {
        let written = self
            .write_response(p.resp, p.head_only, p.minor, p.keep, p.token, p.label)
            .await;
        match self.end_exchange(written, p.observed, p.route) {
            Ok(go_on) => {
                if !go_on {
                    self.linger().await;
                }
                go_on
            }
            Err(()) => false,
        }
    }

    /// Ends an exchange once its response is written (or failed): the body budget back, the
    /// observer told. `Ok(true)`: on to the next request; `Ok(false)`: linger, then close;
    /// `Err`: close now. Inlined: out of line it cost every request about 30 instructions.
    #[inline(always)]
    fn end_exchange(
        &mut self,
        written: io::Result<bool>,
        observed: Option<Observed>,
        route: Option<usize>,
    ) -> Result<bool, ()> {
        self.release_body_budget();
        if let (Some(o), Some((started, method, target))) = (&self.shared.observer, observed) {
            let ended = Instant::now();
            // The next idle wait starts now: its deadline reuses this clock read.
            self.idle_from = Some(ended);
            o.exchange(&Exchange {
                method: method.as_str(),
                target: target.as_deref().unwrap_or(""),
                route: route.and_then(|i| self.shared.router.pattern(i)),
                route_index: route,
                status: self.last_status,
                elapsed: ended - started,
                writes: self.last_writes,
                completed: written.is_ok(),
                peer: self.peer,
            });
        }
        written.map_err(|e| {
            tracing::debug!(peer = %self.peer, error = %e, "connection closed while writing");
        })
    }

    /// Has the bulk writers write `p` and end its exchange, and takes the connection back when
    /// it goes on. The socket and the timer move to the bulk writers' runtime for the response,
    /// so its readiness wakes only their threads, and back after it.
    async fn in_bulk(self, p: Pending) -> Option<Conn> {
        let Some(bulk) = self.shared.bulk.get().cloned() else {
            let mut conn = self;
            return conn.exchange(p).await.then_some(conn);
        };
        let peer = self.peer;
        let written = bulk.spawn(async move {
            let mut conn = self.rebind().ok()?;
            conn.exchange(p).await.then_some(conn)
        });
        match written.await {
            Ok(conn) => conn?.rebind().ok(),
            Err(e) => {
                if e.is_panic() {
                    tracing::error!(%peer, error = %e, "bulk writer panicked; connection closed");
                }
                None
            }
        }
    }

    /// Registers the socket and the timer with the runtime this is called on (in its context),
    /// taking them from the one they were on.
    fn rebind(self) -> io::Result<Conn> {
        let deadline = self.timer.deadline();
        let stream = TcpStream::from_std(self.stream.into_std()?)?;
        Ok(Conn {
            stream,
            timer: Box::pin(sleep_until(deadline)),
            ..self
        })
    }

    /// Reads until a complete head is in the buffer. `Ok(None)`: the connection is done (closed
    /// by the client, idle too long, or the server is shutting down between requests).
    async fn read_head(&mut self, first: bool) -> Result<Option<Request>, Fail> {
        let limits = self.shared.config.limits;
        // The first request's head is timed from the connection's opening; later ones from
        // their first byte, after an idle wait of up to `idle_timeout`. The clock is read only
        // when a wait needs a deadline: a head that arrives in one read (the usual case) costs
        // one clock read, for the idle wait before it, where it cost two.
        let mut idle_deadline = None;
        let mut head_deadline = None;
        let idle_from = self.idle_from.take();
        let mut head_started = first || !self.buf.is_empty();
        loop {
            if !self.buf.is_empty() {
                match parse_head(&self.buf, limits.max_headers) {
                    Ok(Some((len, parsed))) => {
                        if len > limits.max_head_bytes {
                            return Err(Fail::Status(
                                StatusCode::HEADERS_TOO_LARGE,
                                "request head too large",
                            ));
                        }
                        let head = self.buf.split_to(len).freeze();
                        return Ok(Some(parsed.into_request(head, Some(self.peer))));
                    }
                    Ok(None) if self.buf.len() >= limits.max_head_bytes => {
                        return Err(Fail::Status(
                            StatusCode::HEADERS_TOO_LARGE,
                            "request head too large",
                        ));
                    }
                    Ok(None) => {}
                    Err(HeadError::TooManyHeaders) => {
                        return Err(Fail::Status(
                            StatusCode::HEADERS_TOO_LARGE,
                            "too many header lines",
                        ));
                    }
                    Err(HeadError::Malformed) => {
                        return Err(Fail::Status(StatusCode::BAD_REQUEST, "malformed request"));
                    }
                }
            }
            // No complete request is left: the responses waiting for one go out first.
            if self.batch.pending() && self.flush_batch().await.is_err() {
                return Ok(None);
            }
            if self.buf.is_empty() && self.shared.stopping() {
                return Ok(None);
            }
            // `None` until a wait needs it; then fixed for the rest of this head.
            let deadline_slot = if head_started {
                (&mut head_deadline, limits.header_read_timeout, None)
            } else {
                (&mut idle_deadline, limits.idle_timeout, idle_from)
            };
            reserve(&mut self.buf, INIT_READ_BUF);
            let idle = self.buf.is_empty();
            let shared = &self.shared;
            let mut read = std::pin::pin!(self.stream.read_buf(&mut self.buf));
            // An idle connection ends when the server stops: the stop future, polled once when
            // the connection started, wakes this task then, and the flag says why.
            let read = std::pin::pin!(std::future::poll_fn(|cx| {
                if idle && shared.stopping() {
                    return Poll::Ready(None);
                }
                read.as_mut().poll(cx).map(Some)
            }));
            let deadline = || {
                *deadline_slot.0.get_or_insert_with(|| {
                    deadline_slot.2.unwrap_or_else(Instant::now) + deadline_slot.1
                })
            };
            match timed(&mut self.timer, deadline, read).await {
                None if self.buf.is_empty() => return Ok(None),
                None => {
                    return Err(Fail::Status(
                        StatusCode::REQUEST_TIMEOUT,
                        "request head not received in time",
                    ));
                }
                // Shutting down, or the client closed or failed.
                Some(None) | Some(Some(Ok(0))) | Some(Some(Err(_))) => return Ok(None),
                // The head has started: if it is not complete yet, the next wait gets its
                // deadline, from about now, when it needs one.
                Some(Some(Ok(_))) => head_started = true,
            }
        }
    }

    /// Reads the body the head announces (`content-length` or chunked) in full.
    /// The whole body must arrive within `body_read_timeout` of its start, and fit in the
    /// server's budget of buffered body bytes (`budget`, released when the request is done).
    async fn read_body(&mut self, req: &Request) -> Result<Bytes, Fail> {
        let limits = self.shared.config.limits;
        let max = limits.max_body_bytes;
        match body_framing(req, max)? {
            BodyFraming::None => Ok(Bytes::new()),
            BodyFraming::Length(n) => {
                self.take_body_budget(n)?;
                // At most `max_body_bytes`, which is a usize on every supported target.
                let n = usize::try_from(n).map_err(|_| Fail::Close)?;
                if self.buf.len() < n {
                    if self.batch.pending() {
                        self.flush_batch().await.map_err(|()| Fail::Close)?;
                    }
                    self.continue_if_expected(req).await?;
                }
                let deadline = Instant::now() + limits.body_read_timeout;
                self.fill(n, deadline).await?;
                Ok(self.buf.split_to(n).freeze())
            }
            BodyFraming::Chunked => {
                if self.batch.pending() {
                    self.flush_batch().await.map_err(|()| Fail::Close)?;
                }
                self.continue_if_expected(req).await?;
                let deadline = Instant::now() + limits.body_read_timeout;
                let mut decoder = ChunkedDecoder::new(max, limits.max_head_bytes);
                let mut body = BytesMut::new();
                loop {
                    let progress = decoder.decode(&mut self.buf, &mut body)?;
                    self.take_body_budget(body.len() as u64 - self.body_held.bytes)?;
                    if progress == ChunkProgress::Done {
                        return Ok(body.freeze());
                    }
                    self.fill(self.buf.len() + 1, deadline).await?;
                }
            }
        }
    }

    /// Sends `100 Continue` when the client waits for it before sending its body.
    async fn continue_if_expected(&mut self, req: &Request) -> Result<(), Fail> {
        if expects_continue(req) {
            self.stream
                .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                .await
                .map_err(|_| Fail::Close)?;
        }
        Ok(())
    }

    /// Reads until the buffer holds at least `n` bytes, by `deadline`; each read may also stall
    /// for at most the header-read timeout.
    async fn fill(&mut self, n: usize, deadline: Instant) -> Result<(), Fail> {
        let t = self.shared.config.limits.header_read_timeout;
        while self.buf.len() < n {
            let want = (n - self.buf.len()).clamp(INIT_READ_BUF, BODY_READ_CHUNK);
            reserve(&mut self.buf, want);
            let read = std::pin::pin!(self.stream.read_buf(&mut self.buf));
            match timed(&mut self.timer, || deadline.min(Instant::now() + t), read).await {
                None => {
                    return Err(Fail::Status(
                        StatusCode::REQUEST_TIMEOUT,
                        "request body not received in time",
                    ));
                }
                Some(Ok(0)) | Some(Err(_)) => return Err(Fail::Close),
                Some(Ok(_)) => {}
            }
        }
        Ok(())
    }

    /// Answers a bad request and closes.
    async fn fail(&mut self, f: Fail) {
        // The answers to the requests before this one go first.
        if self.batch.pending() && self.flush_batch().await.is_err() {
            return;
        }
        let Fail::Status(status, why) = f else {
            return;
        };
        tracing::debug!(peer = %self.peer, status = status.0, why, "refusing request");
        let resp = Response::error(status, why);
        let parts = resp.into_parts();
        let mut msg = IoList::new();
        let framing = Framing::Length(parts.body.len().unwrap_or(0));
        write_head(
            &mut msg,
            parts.status,
            &parts.headers,
            framing,
            KeepAlive::Close,
        );
        if let BodyKind::Full(b) = parts.body.kind {
            msg.push_list(b);
        }
        let t = self.shared.config.limits.write_timeout;
        self.writer.set_policy(self.shared.config.write_policy);
        let _ = self.writer.take_stats();
        let started = std::time::Instant::now();
        let sent = timeout(t, self.writer.write_all_async(&mut self.stream, &msg)).await;
        if let Some(o) = &self.shared.observer {
            o.exchange(&Exchange {
                method: "-",
                target: "",
                route: None,
                route_index: None,
                status: status.0,
                elapsed: started.elapsed(),
                writes: self.writer.take_stats(),
                completed: matches!(sent, Ok(Ok(()))),
                peer: self.peer,
            });
        }
        if let Ok(Ok(())) = sent {
            self.linger().await;
        }
    }

    /// Half-closes and drains what the client still sends, briefly, so our last response is
    /// not destroyed by a reset.
    async fn linger(&mut self) {
        if self.stream.shutdown().await.is_err() {
            return;
        }
        let deadline = Instant::now() + LINGER_TIMEOUT;
        let mut drained = 0;
        let mut scratch = [0u8; 4096];
        while drained < LINGER_MAX_BYTES {
            match timeout_at(deadline, self.stream.read(&mut scratch)).await {
                Ok(Ok(n)) if n > 0 => drained += n,
                _ => return,
            }
        }
    }
}

fn reserve(buf: &mut BytesMut, at_least: usize) {
    if buf.capacity() - buf.len() < at_least {
        buf.reserve(at_least);
    }
}

impl Conn {
    /// Takes `n` more bytes of the server's budget of buffered request bodies
    /// ([`Limits::max_buffered_body_bytes`](crate::Limits)) for this connection's current
    /// request, or refuses it with 503 when they are not there (a client may retry).
    fn take_body_budget(&mut self, n: u64) -> Result<(), Fail> {
        if n == 0 {
            return Ok(());
        }
        let max = self.shared.config.limits.max_buffered_body_bytes;
        let before = self
            .shared
            .buffered_body_bytes
            .fetch_add(n, Ordering::AcqRel);
        if before.saturating_add(n) > max {
            self.shared
                .buffered_body_bytes
                .fetch_sub(n, Ordering::AcqRel);
            return Err(Fail::Status(
                StatusCode::SERVICE_UNAVAILABLE,
                "the server holds as many request bodies as it may; retry later",
            ));
        }
        self.body_held.bytes += n;
        Ok(())
    }

    /// Gives back the previous request's share of the budget.
    fn release_body_budget(&mut self) {
        self.body_held.release();
    }
}

/// Bytes of the server's request-body budget a connection's current request holds: given back
/// when the request is done, or when the connection's task ends however it ends.
struct BodyHeld {
    bytes: u64,
    shared: Arc<Shared>,
}

impl BodyHeld {
    fn release(&mut self) {
        if self.bytes > 0 {
            self.shared
                .buffered_body_bytes
                .fetch_sub(self.bytes, Ordering::AcqRel);
            self.bytes = 0;
        }
    }
}

impl Drop for BodyHeld {
    fn drop(&mut self) {
        self.release();
    }
}

impl From<Refusal> for Fail {
    fn from(Refusal(status, why): Refusal) -> Fail {
        Fail::Status(status, why)
    }
}
