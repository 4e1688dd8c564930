//! # galleon-http
//!
//! HTTP/1.1 on tokio whose responses are I/O lists: the head and the body of a response go to the
//! socket together, as references, in as few `writev` calls as the [`WritePolicy`] allows; bodies
//! too big to hold are streamed at the pace the socket accepts them; and every write can be seen.
//!
//! - [`Server`] accepts connections (at most [`Limits::max_connections`]), serves each on its own
//!   task, and shuts down gracefully when its shutdown future completes ([`shutdown_signal`] for
//!   SIGINT/SIGTERM).
//! - [`Router`] maps method + path pattern (`/streams/{stream}`, `/static/{*path}`) to a
//!   [`Handler`]: any `async` function from [`Request`] to [`Response`].
//! - [`Response`] carries a [`Body`]: a whole [`IoList`] (sent with `content-length` from
//!   [`IoList::len`]), a stream of `IoList` chunks (sent chunked, each chunk pulled only after the
//!   previous one was written), or a file (sent with `sendfile`).
//! - [`Response::upgrade`] answers `101 Switching Protocols` and hands the connection to its
//!   callback as an [`Upgraded`] (a WebSocket's socket), after [`Request::wants_upgrade`].
//! - With [`ServerConfig::trace_writes`] every write call is logged like the seed's DTrace script
//!   (`writev fd=12 iovcnt=11 bytes=410333`, then one line per segment); with
//!   [`Server::with_traces`] and the [`TraceStore`]'s route mounted, one response's writes can be
//!   fetched (see [`TRACE_HEADER`]).
//!
//! Inside, `h1/` is the wire: `decode` (request heads, body framing, the chunked decoder: pure,
//! no I/O), `encode` (response heads and chunk framing), and `conn` (the connection state
//! machine that reads, dispatches through the [`Router`], and writes).
//!
//! ```
//! use galleon_client::Client;
//! use galleon_http::{IoList, Request, Response, Router, Server, ServerConfig};
//!
//! static GREETING: &str = "<p>Hello</p>\n";
//!
//! let rt = tokio::runtime::Runtime::new().unwrap();
//! rt.block_on(async {
//!     let router = Router::new().get("/hello", |req: Request| async move {
//!         let mut page = IoList::new();
//!         page.push_static_str(GREETING); // referenced, never copied
//!         page.push_copy(req.query().as_bytes()); // small: copied into the list's scratch
//!         Response::html(page)
//!     });
//!     let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
//!     let addr = listener.local_addr().unwrap();
//!     let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//!     let server = tokio::spawn(Server::new(router, ServerConfig::default()).serve(
//!         listener,
//!         async move {
//!             let _ = stopped.await;
//!         },
//!     ));
//!     let resp = tokio::task::spawn_blocking(move || {
//!         let mut c = Client::connect(addr, std::time::Duration::from_secs(5)).unwrap();
//!         c.get("/hello?x=1", &[]).unwrap()
//!     })
//!     .await
//!     .unwrap();
//!     assert_eq!(resp.status, 200);
//!     assert_eq!(resp.body, b"<p>Hello</p>\nx=1");
//!     stop.send(()).unwrap();
//!     server.await.unwrap().unwrap();
//! });
//! ```
//!
//! ## Performance model
//! Per request: one `read` (pipelined requests share reads), one parse with `httparse` into
//! ranges over the read buffer (no per-header allocation), the handler, and the response's head
//! built into the connection's reused `IoList` scratch (one segment) in front of the body. The body
//! is attached in O(1) ([`IoList::push_list`]), so nothing is flattened to learn its length. The
//! writer then issues `ceil(iovecs / max_iov)` `writev` calls (more if the socket takes less),
//! copying only the runs of segments shorter than `coalesce_below`. A streamed body costs one
//! gathered write per chunk; a computed stream ([`Body::iter`]) renders off the socket's task one
//! chunk ahead of the socket (on the offload pool given to [`Server::with_offload`], else on
//! tokio's blocking pool), so at most three chunks are in memory per connection and the
//! server's memory does not grow with the body's size. A file costs one `writev` for the head and one
//! `sendfile` per socket-buffer's worth.
//!
//! ## Invariants
//! - No request input panics the server or leaks a task: every read and write has a timeout,
//!   every size a limit, and a panicking handler becomes a 500.
//! - Responses on a connection go out in request order.

mod bulk;
mod config;
mod date;
mod guard;
mod h1;
mod observe;
mod request;
mod response;
mod router;
mod sendfile;
mod server;
mod trace;
mod trim;
mod upgrade;

pub use config::{
    DEFAULT_BODY_READ_TIMEOUT, DEFAULT_BULK_FILE_BYTES, DEFAULT_HEADER_READ_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_BODY_BYTES, DEFAULT_MAX_BUFFERED_BODY_BYTES,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_HEAD_BYTES, DEFAULT_MAX_HEADERS,
    DEFAULT_PIPELINE_BATCH_BYTES, DEFAULT_SHUTDOWN_GRACE, DEFAULT_STREAM_UNSENT_BYTES,
    DEFAULT_STREAM_UNSENT_MAX_BYTES, DEFAULT_WRITE_TIMEOUT, Limits, ServerConfig,
    default_bulk_writers,
};
pub use galleon_iolist::{IoList, WritePolicy, WriteStats};
pub use guard::{
    Guard, InvalidGuardToken, MIN_GUARD_TOKEN_LEN, bearer_token, is_loopback, tokens_equal,
};
pub use h1::STREAM_CHUNK_KIND;
pub use observe::{Exchange, Observer};
pub use request::{Method, Request, parse_query, percent_decode, query_value, split_query};
pub use response::{Body, BoxError, ChunkIter, ChunkStream, Response, StatusCode};
pub use router::{Handler, Reply, ResponseFuture, Router, SyncHandler, sync_handler};
pub use server::{ServeSummary, Server, shutdown_signal};
pub use trace::{
    MAX_RECORDED_CALLS, MAX_RECORDED_SEGMENTS, MAX_TRACE_SEGMENTS, MAX_TRACE_TOKEN, ResponseTrace,
    SHOWN_PREFIX, SegmentRecord, Syscall, TRACE_HEADER, TRACE_PATH_PREFIX, TRACE_ROUTE,
    TRACE_STORE_CAPACITY, TraceStore, WriteRecord, valid_token,
};
pub use upgrade::Upgraded;
