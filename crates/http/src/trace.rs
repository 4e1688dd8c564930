//! Write tracing: every write call a response made, with its iovecs' lengths, addresses and first
//! bytes, logged (`--trace-writes`) and/or kept for the trace endpoint (`galleon trace`).
//!
//! # How `galleon trace` gets one response's writes
//! A request carrying `x-galleon-trace: TOKEN` (1 to 64 of `[A-Za-z0-9_-]`) is served exactly as
//! usual, but its writes are recorded. Once the response has been written, the record is kept
//! under TOKEN (the last [`TRACE_STORE_CAPACITY`] are kept) and `GET /.galleon/trace/TOKEN`
//! returns it as text, in the format of [`ResponseTrace`]'s `Display`. A client sends both
//! requests on one keep-alive connection: requests are answered in order, so the trace is stored
//! before the second request is read. Recording needs [`Server::with_traces`](crate::Server), and
//! the endpoint is an ordinary route ([`TRACE_ROUTE`] with [`TraceStore::handler`]) that the
//! application mounts, or not.

use std::collections::VecDeque;
use std::fmt::{self, Write as _};
use std::io::{self, IoSlice, Write as _};
use std::sync::{Arc, Mutex};

use galleon_iolist::{WriteStats, WriteTracer};

use crate::request::Request;
use crate::response::{Response, StatusCode};
use crate::router::{Handler, Router, sync_handler};

/// Request header that asks for the response's writes to be recorded under a token.
pub const TRACE_HEADER: &str = "x-galleon-trace";

/// Path prefix of the trace endpoint: `GET /.galleon/trace/TOKEN`.
pub const TRACE_PATH_PREFIX: &str = "/.galleon/trace/";

/// The trace endpoint's route pattern, for [`Router::get`] with [`TraceStore::handler`].
pub const TRACE_ROUTE: &str = "/.galleon/trace/{token}";

/// How many recorded traces the server keeps; the oldest is dropped first. 64 is plenty for a
/// person running `galleon trace` and bounds the memory a client can make the server hold.
pub const TRACE_STORE_CAPACITY: usize = 64;

/// Longest token accepted in [`TRACE_HEADER`].
pub const MAX_TRACE_TOKEN: usize = 64;

/// Most segments recorded per write call; the rest are counted, not listed. A vectored write of
/// 1024 iovecs is listed in full; this caps what one traced response can make the server hold.
pub const MAX_RECORDED_SEGMENTS: usize = 1024;

/// How many first bytes of each segment are shown, as in the seed's DTrace script.
pub const SHOWN_PREFIX: usize = 24;

/// Most write calls recorded for one traced response (a traced 3 GB stream keeps the first ones).
pub const MAX_RECORDED_CALLS: usize = 10_000;

/// Most segments listed over all the calls of one traced response; later calls are still counted
/// and shown, their segments not. Bounds what the store holds: at most
/// [`TRACE_STORE_CAPACITY`] traces of this many ~80-byte records (about 20 MiB in all), where the
/// per-call cap alone allowed gigabytes.
pub const MAX_TRACE_SEGMENTS: usize = 4096;

/// The system call a record describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syscall {
    /// `writev(2)`: every socket write of an `IoList` (tokio hands even one iovec to `writev`).
    Writev,
    /// `sendfile(2)`: a file body.
    Sendfile,
}

/// One segment of a write call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentRecord {
    /// Its length in bytes.
    pub len: usize,
    /// Its address in the server's memory.
    pub addr: usize,
    /// Its first bytes (up to [`SHOWN_PREFIX`]).
    pub prefix: Vec<u8>,
}

/// One write system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// Which call.
    pub syscall: Syscall,
    /// The socket's file descriptor.
    pub fd: i32,
    /// iovecs handed to the call (1 for `sendfile`).
    pub iovcnt: usize,
    /// Bytes offered.
    pub offered: u64,
    /// Bytes the kernel took, or the error.
    pub result: Result<u64, String>,
    /// The segments, at most [`MAX_RECORDED_SEGMENTS`] of them.
    pub segments: Vec<SegmentRecord>,
}

impl fmt::Display for WriteRecord {
    /// `writev fd=12 iovcnt=11 bytes=410333`, then `  [i] len=N addr=0x... "first bytes"` lines.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.syscall {
            Syscall::Writev => "writev",
            Syscall::Sendfile => "sendfile",
        };
        write!(f, "{name} fd={} iovcnt={} ", self.fd, self.iovcnt)?;
        match &self.result {
            Ok(n) if *n == self.offered => writeln!(f, "bytes={n}")?,
            Ok(n) => writeln!(f, "bytes={n} offered={} (short)", self.offered)?,
            Err(e) => writeln!(f, "offered={} error={e}", self.offered)?,
        }
        for (i, s) in self.segments.iter().enumerate() {
            write!(f, "  [{i}] len={} addr={:#014x} \"", s.len, s.addr)?;
            for &b in &s.prefix {
                match b {
                    b'\r' => f.write_str("\\r")?,
                    b'\n' => f.write_str("\\n")?,
                    b'"' => f.write_str("\\\"")?,
                    b'\\' => f.write_str("\\\\")?,
                    0x20..=0x7e => f.write_char(b as char)?,
                    _ => write!(f, "\\x{b:02x}")?,
                }
            }
            f.write_str(if s.len > s.prefix.len() {
                "...\"\n"
            } else {
                "\"\n"
            })?;
        }
        if self.iovcnt > self.segments.len() && self.syscall == Syscall::Writev {
            writeln!(
                f,
                "  ... {} more segments",
                self.iovcnt - self.segments.len()
            )?;
        }
        Ok(())
    }
}

/// The writes of one response and what they added up to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseTrace {
    /// `GET /blah?iters=10 -> 200`.
    pub request: String,
    /// Every write call, in order (at most [`MAX_RECORDED_CALLS`]).
    pub calls: Vec<WriteRecord>,
    /// Calls made but not recorded past the cap.
    pub dropped_calls: u64,
    /// The writer's statistics for this response (`sendfile` calls included).
    pub stats: WriteStats,
    /// Segments listed so far, against [`MAX_TRACE_SEGMENTS`].
    pub(crate) listed_segments: usize,
}

impl fmt::Display for ResponseTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# {}", self.request)?;
        for c in &self.calls {
            write!(f, "{c}")?;
        }
        if self.dropped_calls > 0 {
            writeln!(f, "... {} more calls not recorded", self.dropped_calls)?;
        }
        let s = &self.stats;
        writeln!(
            f,
            "summary: syscalls={} iovecs={} bytes={} referenced={} copied={} short_writes={}",
            s.syscalls, s.iovecs, s.bytes, s.bytes_referenced, s.bytes_copied, s.short_writes
        )
    }
}

/// The [`WriteTracer`] a connection installs: logs to stderr and/or records.
#[derive(Debug)]
pub(crate) struct ConnTracer {
    fd: i32,
    log: bool,
    sink: Arc<Mutex<Option<ResponseTrace>>>,
}

impl ConnTracer {
    /// A tracer for socket `fd`; `log` prints every call to stderr.
    pub(crate) fn new(fd: i32, log: bool) -> (ConnTracer, Arc<Mutex<Option<ResponseTrace>>>) {
        let sink = Arc::new(Mutex::new(None));
        (
            ConnTracer {
                fd,
                log,
                sink: sink.clone(),
            },
            sink,
        )
    }
}

/// Builds the record of one call.
pub(crate) fn record(
    syscall: Syscall,
    fd: i32,
    iov: &[IoSlice<'_>],
    result: &io::Result<usize>,
) -> WriteRecord {
    let segments = iov
        .iter()
        .take(MAX_RECORDED_SEGMENTS)
        .map(|s| SegmentRecord {
            len: s.len(),
            addr: s.as_ptr() as usize,
            prefix: s[..s.len().min(SHOWN_PREFIX)].to_vec(),
        })
        .collect();
    WriteRecord {
        syscall,
        fd,
        iovcnt: iov.len(),
        offered: iov.iter().map(|s| s.len() as u64).sum(),
        result: match result {
            Ok(n) => Ok(*n as u64),
            Err(e) => Err(e.to_string()),
        },
        segments,
    }
}

/// Logs a record to stderr in one write (so lines of concurrent connections do not interleave).
pub(crate) fn log_record(r: &WriteRecord) {
    let text = r.to_string();
    let _ = io::stderr().lock().write_all(text.as_bytes());
}

/// Adds a record to a sink if one is collecting.
pub(crate) fn collect(sink: &Mutex<Option<ResponseTrace>>, r: WriteRecord) {
    let mut g = sink.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(t) = g.as_mut() {
        if t.calls.len() < MAX_RECORDED_CALLS {
            let mut r = r;
            r.segments
                .truncate(MAX_TRACE_SEGMENTS.saturating_sub(t.listed_segments));
            t.listed_segments += r.segments.len();
            t.calls.push(r);
        } else {
            t.dropped_calls += 1;
        }
    }
}

impl WriteTracer for ConnTracer {
    fn on_write(&mut self, iov: &[IoSlice<'_>], result: &io::Result<usize>) {
        let collecting = self
            .sink
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if !self.log && !collecting {
            return;
        }
        let r = record(Syscall::Writev, self.fd, iov, result);
        if self.log {
            log_record(&r);
        }
        if collecting {
            collect(&self.sink, r);
        }
    }
}

/// The last [`TRACE_STORE_CAPACITY`] recorded traces, by token. Cloning shares the store: give
/// one clone to [`Server::with_traces`](crate::Server::with_traces) and serve another with
/// [`TraceStore::handler`].
///
/// # Examples
/// ```
/// use galleon_http::{Router, Server, ServerConfig, TRACE_ROUTE, TraceStore};
///
/// let traces = TraceStore::new();
/// let router = Router::new().get(TRACE_ROUTE, traces.handler());
/// let server = Server::new(router, ServerConfig::default()).with_traces(traces);
/// # drop(server);
/// ```
#[derive(Debug, Default, Clone)]
pub struct TraceStore {
    entries: Arc<Mutex<VecDeque<(String, ResponseTrace)>>>,
}

impl TraceStore {
    /// An empty store.
    pub fn new() -> TraceStore {
        TraceStore::default()
    }

    /// The handler of [`TRACE_ROUTE`]: the trace recorded under the route's `{token}` as text,
    /// or 404. A diagnostics route: it answers loopback peers only (others get the same 404 as
    /// an unknown token), since a trace shows the server's memory addresses.
    pub fn handler(&self) -> impl Handler {
        let store = self.clone();
        sync_handler(move |req: Request| {
            let local = req.peer().is_none_or(|p| p.ip().is_loopback());
            match req
                .param("token")
                .filter(|_| local)
                .and_then(|t| store.get(t))
            {
                Some(t) => Response::text(StatusCode::OK, t.to_string()),
                None => Response::error(StatusCode::NOT_FOUND, "no trace with that token"),
            }
        })
    }

    /// Mounts [`TraceStore::handler`] at [`TRACE_ROUTE`] on `router`.
    pub fn mount(&self, router: Router) -> Router {
        router.get(TRACE_ROUTE, self.handler())
    }

    pub(crate) fn put(&self, token: String, trace: ResponseTrace) {
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        e.retain(|(t, _)| *t != token);
        if e.len() >= TRACE_STORE_CAPACITY {
            e.pop_front();
        }
        e.push_back((token, trace));
    }

    pub(crate) fn get(&self, token: &str) -> Option<ResponseTrace> {
        let e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        e.iter().find(|(t, _)| t == token).map(|(_, tr)| tr.clone())
    }
}

/// True for a token made of 1 to [`MAX_TRACE_TOKEN`] characters of `[A-Za-z0-9_-]`.
pub fn valid_token(t: &[u8]) -> bool {
    !t.is_empty()
        && t.len() <= MAX_TRACE_TOKEN
        && t.iter()
            .all(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_format_matches_the_seed_tracer() {
        let a = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n";
        let b = b"hello";
        let iov = [IoSlice::new(a), IoSlice::new(b)];
        let r = record(Syscall::Writev, 12, &iov, &Ok(a.len() + 5));
        let s = r.to_string();
        let mut lines = s.lines();
        assert_eq!(lines.next(), Some("writev fd=12 iovcnt=2 bytes=43"));
        let l1 = lines.next().unwrap();
        assert!(l1.starts_with("  [0] len=38 addr=0x"), "{l1}");
        assert!(l1.ends_with(r#""HTTP/1.1 200 OK\r\ncontent...""#), "{l1}");
        let l2 = lines.next().unwrap();
        assert!(l2.starts_with("  [1] len=5 addr=0x"), "{l2}");
        assert!(l2.ends_with(r#" "hello""#), "{l2}");
        assert_eq!(lines.next(), None);
    }

    #[test]
    fn store_keeps_the_newest() {
        let st = TraceStore::default();
        for i in 0..TRACE_STORE_CAPACITY + 5 {
            st.put(format!("t{i}"), ResponseTrace::default());
        }
        assert!(st.get("t0").is_none());
        assert!(st.get(&format!("t{}", TRACE_STORE_CAPACITY + 4)).is_some());
    }

    #[test]
    fn a_trace_lists_a_bounded_number_of_segments() {
        let sink = Mutex::new(Some(ResponseTrace::default()));
        let data = [0u8; 8];
        let iov = vec![IoSlice::new(&data); 1000];
        for _ in 0..10 {
            collect(&sink, record(Syscall::Writev, 3, &iov, &Ok(8000)));
        }
        let t = sink.lock().unwrap().take().unwrap();
        assert_eq!(t.calls.len(), 10, "every call is kept");
        let listed: usize = t.calls.iter().map(|c| c.segments.len()).sum();
        assert_eq!(listed, MAX_TRACE_SEGMENTS);
        assert!(
            t.calls.iter().all(|c| c.iovcnt == 1000),
            "counts stay exact"
        );
    }

    #[test]
    fn the_endpoint_answers_loopback_peers_only() {
        let store = TraceStore::new();
        store.put("t1".into(), ResponseTrace::default());
        let router = store.mount(Router::new());
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ask = |peer: &str| {
            let mut req = Request::new(
                crate::Method::Get,
                "/.galleon/trace/t1",
                &[],
                bytes::Bytes::new(),
            );
            req.set_peer(Some(peer.parse().unwrap()));
            rt.block_on(router.handle(req)).status().0
        };
        assert_eq!(ask("127.0.0.1:5000"), 200);
        assert_eq!(ask("[::1]:5000"), 200);
        assert_eq!(ask("192.0.2.7:5000"), 404);
    }

    #[test]
    fn tokens() {
        assert!(valid_token(b"abc-123_X"));
        assert!(!valid_token(b""));
        assert!(!valid_token(b"a/b"));
        assert!(!valid_token(&[b'a'; MAX_TRACE_TOKEN + 1]));
    }
}
