//! `Response` and its `Body`: a whole [`IoList`], a stream of `IoList` chunks, or a file.

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
    /// 304 Not Modified
    pub const NOT_MODIFIED: StatusCode = StatusCode(304);
    /// 400 Bad Request
    pub const BAD_REQUEST: StatusCode = StatusCode(400);
    /// 404 Not Found
    pub const NOT_FOUND: StatusCode = StatusCode(404);
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
    /// 431 Request Header Fields Too Large
    pub const HEADERS_TOO_LARGE: StatusCode = StatusCode(431);
    /// 500 Internal Server Error
    pub const INTERNAL_SERVER_ERROR: StatusCode = StatusCode(500);
    /// 501 Not Implemented
    pub const NOT_IMPLEMENTED: StatusCode = StatusCode(501);
    /// 503 Service Unavailable
    pub const SERVICE_UNAVAILABLE: StatusCode = StatusCode(503);

    /// The status line for this code, `HTTP/1.1 200 OK\r\n`, as a static string for the common
    /// codes (so the head's first segment is never copied) or `None` for the others.
    pub(crate) fn static_line(self) -> Option<&'static str> {
        Some(match self.0 {
            100 => "HTTP/1.1 100 Continue\r\n",
            200 => "HTTP/1.1 200 OK\r\n",
            201 => "HTTP/1.1 201 Created\r\n",
            204 => "HTTP/1.1 204 No Content\r\n",
            304 => "HTTP/1.1 304 Not Modified\r\n",
            400 => "HTTP/1.1 400 Bad Request\r\n",
            404 => "HTTP/1.1 404 Not Found\r\n",
            405 => "HTTP/1.1 405 Method Not Allowed\r\n",
            408 => "HTTP/1.1 408 Request Timeout\r\n",
            409 => "HTTP/1.1 409 Conflict\r\n",
            413 => "HTTP/1.1 413 Content Too Large\r\n",
            422 => "HTTP/1.1 422 Unprocessable Content\r\n",
            431 => "HTTP/1.1 431 Request Header Fields Too Large\r\n",
            500 => "HTTP/1.1 500 Internal Server Error\r\n",
            501 => "HTTP/1.1 501 Not Implemented\r\n",
            503 => "HTTP/1.1 503 Service Unavailable\r\n",
            _ => return None,
        })
    }

    /// True for statuses that never carry a body (1xx, 204, 304).
    pub fn is_bodiless(self) -> bool {
        self.0 < 200 || self.0 == 204 || self.0 == 304
    }
}

/// A stream of body chunks; each chunk is written (with one gathered write) before the next is
/// pulled, so the socket's pace is the producer's pace.
pub type ChunkStream = Pin<Box<dyn Stream<Item = Result<IoList, BoxError>> + Send + 'static>>;

/// A producer of body chunks that computes each one when asked (a streaming template render).
/// It runs on tokio's blocking pool, at most one chunk ahead of the socket, so computing chunk
/// `n + 1` overlaps with writing chunk `n` and never occupies a request worker.
pub type ChunkIter = Box<dyn Iterator<Item = Result<IoList, BoxError>> + Send + 'static>;

/// A response body.
pub struct Body {
    pub(crate) kind: BodyKind,
}

pub(crate) enum BodyKind {
    Full(IoList),
    Stream(ChunkStream),
    Iter(ChunkIter),
    File(std::fs::File, u64),
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
    /// rendered in pieces). Sent chunked. The iterator runs on the blocking pool at most one chunk
    /// ahead of the socket (see [`ChunkIter`]), so its pace is the socket's, and it is dropped
    /// once the client has gone (having computed at most two chunks nobody reads).
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
        Body {
            kind: BodyKind::File(file, len),
        }
    }

    /// The body's length when it is known before sending.
    pub fn len(&self) -> Option<u64> {
        match &self.kind {
            BodyKind::Full(l) => Some(l.len() as u64),
            BodyKind::File(_, n) => Some(*n),
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
            BodyKind::File(_, n) => f.debug_tuple("Body::File").field(n).finish(),
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
}

impl Response {
    /// A response with this status and body and no headers.
    pub fn new(status: StatusCode, body: impl Into<Body>) -> Response {
        Response(Box::new(Parts {
            status,
            headers: HeaderList::new(),
            body: body.into(),
            policy: None,
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
}

/// A response's headers: two inline, the usual `content-type` and perhaps one more, so a page's
/// response allocates nothing for them.
pub(crate) type HeaderList = SmallVec<[(Cow<'static, str>, Cow<'static, str>); 2]>;

// Statics, not consts: every use is then the same address, which `is_html_only` relies on.
static CONTENT_TYPE: &str = "content-type";
static HTML: &str = "text/html; charset=utf-8";
const TEXT: &str = "text/plain; charset=utf-8";

/// What [`write_head`] sends for `200` with only [`Response::html`]'s header.
const HTML_OK_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\n";

/// Whether `headers` is exactly the header [`Response::html`] sets (by address: the constants
/// themselves, so a match can only be those bytes).
fn is_html_only(headers: &HeaderList) -> bool {
    matches!(&headers[..], [(Cow::Borrowed(n), Cow::Borrowed(v))]
        if std::ptr::eq(*n, CONTENT_TYPE) && std::ptr::eq(*v, HTML))
}

/// How the body is framed on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// `content-length: N`.
    Length(u64),
    /// `transfer-encoding: chunked`.
    Chunked,
    /// Neither: the body runs to the connection's close (HTTP/1.0 streams).
    Close,
    /// No body and no length header (1xx, 204, 304).
    None,
}

/// Appends the response head to `out`: status line, the handler's headers, framing, `date`,
/// `connection`, all copied in one pass into one scratch run ([`IoList::push_copy_with`]). One
/// run, not a static status line beside the rest: a lone small segment in front of a large
/// body is handed to `writev` where it lies, where two would first be copied together again.
pub(crate) fn write_head(
    out: &mut IoList,
    status: StatusCode,
    headers: &HeaderList,
    framing: Framing,
    keep_alive: KeepAlive,
) {
    out.push_copy_with(|b| {
        if status == StatusCode::OK && is_html_only(headers) {
            // The usual page: status line and header in one copy.
            b.push(HTML_OK_HEAD.as_bytes());
        } else {
            match status.static_line() {
                Some(line) => b.push(line.as_bytes()),
                None => {
                    let mut digits = [0u8; 20];
                    b.push(b"HTTP/1.1 ");
                    b.push(fmt_u64(u64::from(status.0), &mut digits));
                    b.push(b" Status\r\n");
                }
            }
            // Checked by `Response::with_header`, the only way in.
            for (n, v) in headers {
                b.push(n.as_bytes());
                b.push(b": ");
                b.push(v.as_bytes());
                b.push(b"\r\n");
            }
        }
        match framing {
            Framing::Length(n) => {
                let mut digits = [0u8; 20];
                b.push(b"content-length: ");
                b.push(fmt_u64(n, &mut digits));
                b.push(b"\r\ndate: ");
            }
            Framing::Chunked => b.push(b"transfer-encoding: chunked\r\ndate: "),
            Framing::Close | Framing::None => b.push(b"date: "),
        }
        crate::date::with_date(|d| b.push(d));
        b.push(match keep_alive {
            KeepAlive::Close => b"\r\nconnection: close\r\n\r\n",
            KeepAlive::KeepAlive10 => b"\r\nconnection: keep-alive\r\n\r\n",
            KeepAlive::Default => b"\r\n\r\n",
        });
    });
}

/// What the `connection` header says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum KeepAlive {
    /// HTTP/1.1 default: nothing to say.
    Default,
    /// HTTP/1.0 client that asked for keep-alive.
    KeepAlive10,
    /// This is the last response on the connection.
    Close,
}

fn valid_header(n: &str, v: &str) -> bool {
    !n.is_empty()
        && n.bytes().all(|b| b.is_ascii_graphic() && b != b':')
        && v.bytes().all(|b| b != b'\r' && b != b'\n' && b != 0)
}

/// Formats `n` in decimal into `buf`, returning the digits.
pub(crate) fn fmt_u64(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    &buf[i..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_has_length_date_and_status() {
        let mut out = IoList::new();
        let headers: HeaderList = smallvec::smallvec![("content-type".into(), "text/html".into())];
        write_head(
            &mut out,
            StatusCode::OK,
            &headers,
            Framing::Length(410333),
            KeepAlive::Default,
        );
        let s = String::from_utf8(out.to_vec()).unwrap();
        assert!(s.starts_with("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\n"));
        assert!(s.contains("content-length: 410333\r\n"));
        assert!(s.contains("\r\ndate: "));
        assert!(s.ends_with(" GMT\r\n\r\n"), "{s:?}");
        assert_eq!(out.segment_count(), 1, "the whole head is one scratch run");
    }

    #[test]
    fn the_html_fast_path_sends_what_the_general_path_sends() {
        let head = |resp: Response| {
            let parts = resp.into_parts();
            let mut out = IoList::new();
            write_head(
                &mut out,
                parts.status,
                &parts.headers,
                Framing::Length(7),
                KeepAlive::Default,
            );
            String::from_utf8(out.to_vec()).unwrap()
        };
        let fast = head(Response::html("x"));
        assert!(is_html_only(&Response::html("x").into_parts().headers));
        // The same header given by hand (owned strings) takes the general path.
        let general = head(
            Response::new(StatusCode::OK, "x")
                .with_header(String::from(CONTENT_TYPE), String::from(HTML)),
        );
        let strip_date = |s: &str| s[..s.find("date: ").unwrap()].to_owned();
        assert_eq!(strip_date(&fast), strip_date(&general));
        assert_eq!(
            strip_date(&fast),
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: 7\r\n"
        );
        // Another status or a second header is not the fast path.
        assert!(head(Response::html("x").with_header("x-a", "b")).contains("x-a: b\r\n"));
        let created = Response::new(StatusCode(201), "x");
        assert!(head(created).starts_with("HTTP/1.1 201 Created\r\n"));
    }

    #[test]
    fn header_injection_is_dropped() {
        let resp = Response::new(StatusCode(299), Body::empty())
            .with_header("x-bad", "a\r\nset-cookie: evil")
            .with_header("x-bad:", "colon")
            .with_header("", "empty name")
            .with_header("x-nul", "a\0b")
            .with_header("x-good", "ok");
        let parts = resp.into_parts();
        assert_eq!(parts.headers.len(), 1);
        let mut out = IoList::new();
        write_head(
            &mut out,
            parts.status,
            &parts.headers,
            Framing::None,
            KeepAlive::Close,
        );
        let s = String::from_utf8(out.to_vec()).unwrap();
        assert!(s.starts_with("HTTP/1.1 299 Status\r\n"));
        assert!(!s.contains("evil"));
        assert!(s.contains("x-good: ok\r\n"));
        assert!(s.ends_with("connection: close\r\n\r\n"));
    }

    #[test]
    fn the_unchecked_headers_are_valid() {
        for (n, v) in [(CONTENT_TYPE, HTML), (CONTENT_TYPE, TEXT)] {
            assert!(valid_header(n, v), "{n}: {v}");
        }
    }

    #[test]
    fn decimal_formatting() {
        let mut b = [0u8; 20];
        assert_eq!(fmt_u64(0, &mut b), b"0");
        assert_eq!(fmt_u64(u64::MAX, &mut b), b"18446744073709551615");
    }
}
