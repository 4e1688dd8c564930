//! `Response` and its `Body`: a whole [`IoList`], a stream of `IoList` chunks, or a file.
//!
//! A `Response` is one pointer to its status, headers, `Body` and optional `WritePolicy`; header
//! values with invalid bytes are dropped when set (logged).

use std::any::Any;
use std::borrow::Cow;
use std::fmt;
use std::pin::Pin;

use futures::Stream;
use galleon_iolist::{IoList, WritePolicy};
use smallvec::SmallVec;

/// An error from a body stream; the response is cut short and the connection closed.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An HTTP status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusCode(pub u16);

impl StatusCode {
    /// 100 Continue
    pub const CONTINUE: StatusCode = StatusCode(100);
    /// 200 OK
    pub const OK: StatusCode = StatusCode(200);
    /// 201 Created
    pub const CREATED: StatusCode = StatusCode(201);
    /// 204 No Content
    pub const NO_CONTENT: StatusCode = StatusCode(204);
    /// 206 Partial Content
    pub const PARTIAL_CONTENT: StatusCode = StatusCode(206);
    /// 304 Not Modified
    pub const NOT_MODIFIED: StatusCode = StatusCode(304);
    /// 400 Bad Request
    pub const BAD_REQUEST: StatusCode = StatusCode(400);
    /// 404 Not Found
    pub const NOT_FOUND: StatusCode = StatusCode(404);
    /// 403 Forbidden
    pub const FORBIDDEN: StatusCode = StatusCode(403);
    /// 405 Method Not Allowed
    pub const METHOD_NOT_ALLOWED: StatusCode = StatusCode(405);
    /// 408 Request Timeout
    pub const REQUEST_TIMEOUT: StatusCode = StatusCode(408);
    /// 409 Conflict
    pub const CONFLICT: StatusCode = StatusCode(409);
    /// 413 Content Too Large
    pub const CONTENT_TOO_LARGE: StatusCode = StatusCode(413);
    /// 422 Unprocessable Content
    pub const UNPROCESSABLE: StatusCode = StatusCode(422);
    /// 416 Range Not Satisfiable
    pub const RANGE_NOT_SATISFIABLE: StatusCode = StatusCode(416);
    /// 431 Request Header Fields Too Large
    pub const HEADERS_TOO_LARGE: StatusCode = StatusCode(431);
    /// 500 Internal Server Error
    pub const INTERNAL_SERVER_ERROR: StatusCode = StatusCode(500);
    /// 501 Not Implemented
    pub const NOT_IMPLEMENTED: StatusCode = StatusCode(501);
    /// 503 Service Unavailable
    pub const SERVICE_UNAVAILABLE: StatusCode = StatusCode(503);

    /// True for statuses that never carry a body (1xx, 204, 304).
    pub fn is_bodiless(self) -> bool {
        self.0 < 200 || self.0 == 204 || self.0 == 304
    }
}

/// A stream of body chunks; each chunk is written (with one gathered write) before the next is
/// pulled, so the socket's pace is the producer's pace.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<IoList, BoxError>> + Send + 'static>>;

/// A producer of body chunks that computes each one when asked (a streaming template render).
/// With an offload pool ([`Server::with_offload`](crate::Server::with_offload)) each chunk runs
/// where the pool's policy for the `stream-chunk` kind says: inline in the task that writes the
/// stream, when the socket has taken the chunk before, or on a pool thread, one chunk ahead.
/// Without one it runs on tokio's blocking pool, one chunk ahead of the socket.
pub type ChunkIter = Box<dyn Iterator<Item = Result<IoList, BoxError>> + Send + 'static>;

/// A response body.
pub struct Body {
    pub(crate) kind: BodyKind,
}

pub(crate) enum BodyKind {
    Full(IoList),
    Stream(ChunkStream),
    Iter(ChunkIter),
    /// A file, from an offset, this many bytes.
    File(std::fs::File, u64, u64),
    /// No body: after the `101` head the connection goes to this ([`Response::upgrade`]).
    Upgrade(crate::upgrade::OnUpgrade),
}

impl Body {
    /// No body (`content-length: 0`).
    pub fn empty() -> Body {
        Body {
            kind: BodyKind::Full(IoList::new()),
        }
    }

    /// A body whose bytes are all known: sent with `content-length` from [`IoList::len`], head and
    /// body in the same gathered writes.
    pub fn full(list: IoList) -> Body {
        Body {
            kind: BodyKind::Full(list),
        }
    }

    /// A body of unknown length from an async stream (server-sent events, a subscription): sent
    /// with `transfer-encoding: chunked`, one chunk per item; the stream is dropped as soon as the
    /// client goes away, even while it is waiting for its next item.
    pub fn stream<S>(s: S) -> Body
    where
        S: Stream<Item = Result<IoList, BoxError>> + Send + 'static,
    {
        Body {
            kind: BodyKind::Stream(Box::pin(s)),
        }
    }

    /// A body of unknown length from an iterator that computes each chunk when pulled (a template
    /// rendered in pieces). Sent chunked. The iterator runs at most one chunk ahead of the
    /// socket (see [`ChunkIter`] for where), so its pace is the socket's, and it is dropped once
    /// the client has gone (having computed at most two chunks nobody reads).
    pub fn iter<I, E>(it: I) -> Body
    where
        I: Iterator<Item = Result<IoList, E>> + Send + 'static,
        E: Into<BoxError>,
    {
        Body {
            kind: BodyKind::Iter(Box::new(it.map(|r| r.map_err(Into::into)))),
        }
    }

    /// The first `len` bytes of a file, sent with `sendfile(2)` (the file's own offset is not
    /// used or moved).
    pub fn file(file: std::fs::File, len: u64) -> Body {
        Body::file_range(file, 0, len)
    }

    /// `len` bytes of a file from byte `offset` on (a `206 Partial Content` answer to a
    /// `Range` request), sent with `sendfile(2)`.
    pub fn file_range(file: std::fs::File, offset: u64, len: u64) -> Body {
        Body {
            kind: BodyKind::File(file, offset, len),
        }
    }

    /// The body's length when it is known before sending.
    pub fn len(&self) -> Option<u64> {
        match &self.kind {
            BodyKind::Full(l) => Some(l.len() as u64),
            BodyKind::File(_, _, n) => Some(*n),
            BodyKind::Upgrade(_) => Some(0),
            BodyKind::Stream(_) | BodyKind::Iter(_) => None,
        }
    }

    /// True when the body is known to be empty.
    pub fn is_empty(&self) -> bool {
        self.len() == Some(0)
    }

    /// The whole body when it is a full one.
    pub fn as_full(&self) -> Option<&IoList> {
        match &self.kind {
            BodyKind::Full(l) => Some(l),
            _ => None,
        }
    }
}

impl fmt::Debug for Body {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BodyKind::Full(l) => f.debug_tuple("Body::Full").field(l).finish(),
            BodyKind::Stream(_) => f.write_str("Body::Stream"),
            BodyKind::Iter(_) => f.write_str("Body::Iter"),
            BodyKind::File(_, at, n) => f.debug_tuple("Body::File").field(at).field(n).finish(),
            BodyKind::Upgrade(on) => f
                .debug_struct("Body::Upgrade")
                .field("asked", &on.asked)
                .finish_non_exhaustive(),
        }
    }
}

impl From<IoList> for Body {
    fn from(l: IoList) -> Self {
        Body::full(l)
    }
}

impl From<&'static str> for Body {
    fn from(s: &'static str) -> Self {
        Body::full(IoList::from(s))
    }
}

impl From<String> for Body {
    fn from(s: String) -> Self {
        Body::full(IoList::from(s))
    }
}

/// A response: status, headers, body, and optionally its own write policy.
///
/// `content-length` / `transfer-encoding`, `date` and `connection` are added by the server; a
/// handler sets everything else.
///
/// One pointer wide: the parts (272 bytes) live in one allocation, so the handler's return, the
/// panic guard and the connection's write move 8 bytes each, not the whole response. Profiles of
/// 4 KB responses had those moves as the largest user-space cost of a request (see
/// `bench/results/http.txt`).
#[derive(Debug)]
pub struct Response(Box<Parts>);

/// What a [`Response`] holds.
#[derive(Debug)]
pub(crate) struct Parts {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderList,
    pub(crate) body: Body,
    pub(crate) policy: Option<WritePolicy>,
    /// What [`Response::hold_until_sent`] was given: dropped with the parts, once the response
    /// is written (or the connection gave up on it).
    pub(crate) held: Option<Box<dyn Any + Send>>,
}

impl Response {
    /// A response with this status and body and no headers.
    pub fn new(status: StatusCode, body: impl Into<Body>) -> Response {
        Response(Box::new(Parts {
            status,
            headers: HeaderList::new(),
            body: body.into(),
            policy: None,
            held: None,
        }))
    }

    /// 200 with `content-type: text/html; charset=utf-8`.
    pub fn html(body: impl Into<Body>) -> Response {
        Response::new(StatusCode::OK, body).with_checked_header(CONTENT_TYPE, HTML)
    }

    /// `status` with a plain-text body.
    pub fn text(status: StatusCode, body: impl Into<Body>) -> Response {
        Response::new(status, body).with_checked_header(CONTENT_TYPE, TEXT)
    }

    /// Adds a header known to be valid (the constants of this module, checked by a test).
    fn with_checked_header(mut self, name: &'static str, value: &'static str) -> Response {
        self.0
            .headers
            .push((Cow::Borrowed(name), Cow::Borrowed(value)));
        self
    }

    /// A plain-text error page: the status, then `message` on its own line.
    pub fn error(status: StatusCode, message: impl fmt::Display) -> Response {
        Response::text(status, format!("{} {message}\n", status.0))
    }

    /// 404 with a short text body.
    pub fn not_found() -> Response {
        Response::error(StatusCode::NOT_FOUND, "not found")
    }

    /// Adds a header. Names are sent as given (lowercase is conventional) and must be visible
    /// ASCII without `:`; values must not contain CR, LF or NUL. A header that breaks these rules
    /// is dropped here, with a warning, so it can never inject lines into the head.
    pub fn with_header(
        mut self,
        name: impl Into<Cow<'static, str>>,
        value: impl Into<Cow<'static, str>>,
    ) -> Response {
        let (name, value) = (name.into(), value.into());
        if valid_header(&name, &value) {
            self.0.headers.push((name, value));
        } else {
            tracing::warn!(name = %name, "dropping a response header with invalid bytes");
        }
        self
    }

    /// Uses `policy` for this response's writes instead of the server's.
    pub fn with_policy(mut self, policy: WritePolicy) -> Response {
        self.0.policy = Some(policy);
        self
    }

    /// Keeps `value` alive until this response has been written to the socket, or until the
    /// connection gave up on it (closed, timed out, shut down): a permit, or a share of a byte
    /// budget that the response's body counts against, released when its memory is.
    ///
    /// # Examples
    /// ```
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    ///
    /// struct Share(Arc<AtomicUsize>, usize);
    /// impl Drop for Share {
    ///     fn drop(&mut self) {
    ///         self.0.fetch_sub(self.1, Ordering::Relaxed);
    ///     }
    /// }
    ///
    /// let held = Arc::new(AtomicUsize::new(0));
    /// let page = "<p>a big page</p>";
    /// held.fetch_add(page.len(), Ordering::Relaxed);
    /// let resp = galleon_http::Response::html(page).hold_until_sent(Share(held.clone(), page.len()));
    /// assert_eq!(held.load(Ordering::Relaxed), page.len());
    /// drop(resp); // as the server does once it is written
    /// assert_eq!(held.load(Ordering::Relaxed), 0);
    /// ```
    pub fn hold_until_sent(mut self, value: impl Send + 'static) -> Response {
        self.0.held = Some(match self.0.held.take() {
            None => Box::new(value),
            Some(earlier) => Box::new((earlier, value)),
        });
        self
    }

    /// The status.
    pub fn status(&self) -> StatusCode {
        self.0.status
    }

    /// The headers set by the handler.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.headers.iter().map(|(n, v)| (&**n, &**v))
    }

    /// The body.
    pub fn body(&self) -> &Body {
        &self.0.body
    }

    /// The policy set on this response, if any.
    pub fn policy(&self) -> Option<WritePolicy> {
        self.0.policy
    }

    pub(crate) fn into_parts(self) -> Box<Parts> {
        self.0
    }

    /// Takes out what an upgrade response hands the connection to, leaving an empty body.
    pub(crate) fn take_upgrade(&mut self) -> Option<crate::upgrade::OnUpgrade> {
        match std::mem::replace(&mut self.0.body, Body::empty()).kind {
            BodyKind::Upgrade(on) => Some(on),
            other => {
                self.0.body = Body { kind: other };
                None
            }
        }
    }
}

/// A response's headers: two inline, the usual `content-type` and perhaps one more, so a page's
/// response allocates nothing for them.
pub(crate) type HeaderList = SmallVec<[(Cow<'static, str>, Cow<'static, str>); 2]>;

// Statics, not consts: every use is then the same address, which the head encoder's fast path
// (`h1::encode`) relies on.
pub(crate) static CONTENT_TYPE: &str = "content-type";
pub(crate) static HTML: &str = "text/html; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

fn valid_header(n: &str, v: &str) -> bool {
    !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && v.bytes().all(|b| b != b'\r' && b != b'\n' && b != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unchecked_headers_are_valid() {
        for (n, v) in [(CONTENT_TYPE, HTML), (CONTENT_TYPE, TEXT)] {
            assert!(valid_header(n, v), "{n}: {v}");
        }
    }
}
