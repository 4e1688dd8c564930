//! Request framing off the wire: the head (method, target, headers as ranges of the read buffer),
//! how long the body is (`content-length` or chunked, with the RFC 9112 rules), and the chunked
//! decoder. Pure functions and a state machine over bytes: no I/O, so every rule is tested byte by
//! byte without a socket.

use std::mem::MaybeUninit;
use std::net::SocketAddr;
use std::ops::Range;

use bytes::{Buf, Bytes, BytesMut};

use crate::request::{HeaderAt, HeaderRanges, Method, Request, split_target};
use crate::response::StatusCode;

/// Longest chunk-size line in a chunked request body (`1f4;ext=value\r\n`): 1 KiB leaves room
/// for chunk extensions, which nobody sends, while refusing a line that never ends.
pub(crate) const MAX_CHUNK_LINE: usize = 1024;

/// A request the server answers with this status and message, then closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Refusal(pub(crate) StatusCode, pub(crate) &'static str);

/// Why a request head was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadError {
    /// Not HTTP/1.x syntax: 400.
    Malformed,
    /// More header lines than allowed: 431.
    TooManyHeaders,
}

/// Parses a complete head from `buf`. `Ok(None)` means more bytes are needed; on success returns
/// the head's length in bytes and a request whose ranges are relative to `buf[..len]`.
pub(crate) fn parse_head(
    buf: &[u8],
    max_headers: usize,
) -> Result<Option<(usize, ParsedHead)>, HeadError> {
    // The slots are left uninitialised (httparse writes the ones it fills), as hyper does:
    // initialising 64 empty headers was a visible share of a small request's CPU.
    if max_headers <= STACK_HEADERS {
        let mut storage = [const { MaybeUninit::uninit() }; STACK_HEADERS];
        parse_into(buf, &mut storage[..max_headers])
    } else {
        let mut storage: Vec<_> = (0..max_headers).map(|_| MaybeUninit::uninit()).collect();
        parse_into(buf, &mut storage)
    }
}

/// Header slots kept on the stack while parsing: the default `max_headers`, so the common case
/// allocates nothing (2 KiB of stack).
const STACK_HEADERS: usize = crate::config::DEFAULT_MAX_HEADERS;

fn parse_into<'b>(
    buf: &'b [u8],
    storage: &mut [MaybeUninit<httparse::Header<'b>>],
) -> Result<Option<(usize, ParsedHead)>, HeadError> {
    // Header positions are kept as `u32` offsets: a head past the first 4 GiB of the buffer is
    // never complete (every configurable head limit is far below it).
    let buf = &buf[..buf.len().min(u32::MAX as usize)];
    let mut req = httparse::Request::new(&mut []);
    let len = match req.parse_with_uninit_headers(buf, storage) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(HeadError::TooManyHeaders),
        Err(_) => return Err(HeadError::Malformed),
    };
    let base = buf.as_ptr() as usize;
    let at = |s: &[u8]| {
        let start = s.as_ptr() as usize - base;
        start..start + s.len()
    };
    let method = Method::from_token(req.method.ok_or(HeadError::Malformed)?);
    let target = req.path.ok_or(HeadError::Malformed)?;
    if target.is_empty() {
        return Err(HeadError::Malformed);
    }
    let minor_version = req.version.ok_or(HeadError::Malformed)?;
    let mut headers = HeaderRanges::with_capacity(req.headers.len());
    for h in req.headers.iter() {
        headers.push(HeaderAt::new(at(h.name.as_bytes()), at(h.value)));
    }
    let origin = origin_part(buf, at(target.as_bytes())).ok_or(HeadError::Malformed)?;
    let (path, query) = split_target(origin, buf);
    Ok(Some((
        len,
        ParsedHead {
            method,
            path,
            query,
            headers,
            minor_version,
        },
    )))
}

/// The parts of a head, before it is attached to its buffer.
#[derive(Debug)]
pub(crate) struct ParsedHead {
    method: Method,
    path: Range<usize>,
    query: Option<Range<usize>>,
    headers: HeaderRanges,
    minor_version: u8,
}

impl ParsedHead {
    /// Attaches the head to its bytes (the `len` bytes `parse_head` consumed).
    pub(crate) fn into_request(self, head: Bytes, peer: Option<SocketAddr>) -> Request {
        Request::from_head(
            self.method,
            head,
            self.path,
            self.query,
            self.headers,
            self.minor_version,
            peer,
        )
    }
}

/// The path-and-query part of a request target: the target itself in origin form (`/a?b`), what
/// follows the authority in absolute form (`http://host/a?b`, which RFC 9112 section 3.2.2 says
/// a server must accept; its path may be empty, read as `/`), `*` (the asterisk form, for the
/// router to answer). `None` for any other target (`GET abc`): RFC 9112 section 3.2 has no such
/// form, so the request is malformed (400), not a path to look up.
fn origin_part(buf: &[u8], target: Range<usize>) -> Option<Range<usize>> {
    let t = &buf[target.clone()];
    let scheme = [&b"http://"[..], b"https://"]
        .into_iter()
        .find(|s| t.len() >= s.len() && t[..s.len()].eq_ignore_ascii_case(s));
    match scheme {
        Some(s) => {
            let after = &t[s.len()..];
            let rest = after
                .iter()
                .position(|&b| b == b'/' || b == b'?')
                .unwrap_or(after.len());
            Some(target.start + s.len() + rest..target.end)
        }
        None if t.first() == Some(&b'/') || t == b"*" => Some(target),
        None => None,
    }
}

/// How a request's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyFraming {
    /// No body.
    None,
    /// Exactly this many bytes (`content-length`, already checked against the limit).
    Length(u64),
    /// `transfer-encoding: chunked`: decode with a [`ChunkedDecoder`].
    Chunked,
}

/// Reads the body's framing from the head (RFC 9112 section 6): at most one `transfer-encoding`,
/// only `chunked`, never beside `content-length` nor in HTTP/1.0; repeated `content-length`s must
/// agree; a length over `max` is refused before any of the body is read.
pub(crate) fn body_framing(req: &Request, max: u64) -> Result<BodyFraming, Refusal> {
    let mut lengths = req.header_values("content-length");
    let first_len = lengths.next();
    let mut tes = req.header_values("transfer-encoding");
    let te = tes.next();
    if tes.next().is_some() {
        return Err(Refusal(
            StatusCode::BAD_REQUEST,
            "more than one transfer-encoding header",
        ));
    }
    if let Some(te) = te {
        if first_len.is_some() {
            // RFC 9112 §6.3: both at once is a smuggling attempt until proven otherwise.
            return Err(Refusal(
                StatusCode::BAD_REQUEST,
                "both content-length and transfer-encoding",
            ));
        }
        if req.minor_version() == 0 {
            return Err(Refusal(
                StatusCode::BAD_REQUEST,
                "transfer-encoding in an HTTP/1.0 request",
            ));
        }
        if !trim(te).eq_ignore_ascii_case(b"chunked") {
            return Err(Refusal(
                StatusCode::NOT_IMPLEMENTED,
                "only chunked transfer-encoding is supported",
            ));
        }
        return Ok(BodyFraming::Chunked);
    }
    let Some(first_len) = first_len else {
        return Ok(BodyFraming::None);
    };
    let n =
        parse_length(first_len).ok_or(Refusal(StatusCode::BAD_REQUEST, "bad content-length"))?;
    for other in lengths {
        if parse_length(other) != Some(n) {
            return Err(Refusal(
                StatusCode::BAD_REQUEST,
                "conflicting content-length headers",
            ));
        }
    }
    if n > max {
        return Err(Refusal(
            StatusCode::CONTENT_TOO_LARGE,
            "request body too large",
        ));
    }
    Ok(BodyFraming::Length(n))
}

/// RFC 9112 section 3.2: an HTTP/1.1 request has exactly one `Host`, and any `Host` holds a valid
/// authority (`host[:port]`, IPv6 in brackets; empty is allowed); otherwise 400.
pub(crate) fn check_host(req: &Request) -> Result<(), Refusal> {
    let mut hosts = req.header_values("host");
    match (hosts.next(), hosts.next()) {
        (None, _) if req.minor_version() == 1 => {
            Err(Refusal(StatusCode::BAD_REQUEST, "missing host header"))
        }
        (None, _) => Ok(()),
        (Some(_), Some(_)) => Err(Refusal(
            StatusCode::BAD_REQUEST,
            "more than one host header",
        )),
        (Some(v), None) if valid_authority(v) => Ok(()),
        (Some(_), None) => Err(Refusal(StatusCode::BAD_REQUEST, "invalid host header")),
    }
}

/// `host[:port]` as RFC 3986 allows it: registered names (unreserved, percent-encoded and
/// sub-delimiter characters), IPv4, or an IPv6 literal in brackets; a port of digits.
fn valid_authority(v: &[u8]) -> bool {
    let (host, port) = match v.strip_prefix(b"[") {
        Some(rest) => match rest.iter().position(|&b| b == b']') {
            Some(end) => {
                let literal = &rest[..end];
                if literal.is_empty()
                    || !literal
                        .iter()
                        .all(|&b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
                {
                    return false;
                }
                (&b""[..], &rest[end + 1..])
            }
            None => return false,
        },
        None => match v.iter().position(|&b| b == b':') {
            Some(i) => (&v[..i], &v[i..]),
            None => (v, &b""[..]),
        },
    };
    let host_ok = host
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=".contains(&b));
    let port_ok = match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.len() <= 5 && digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    };
    host_ok && port_ok
}

/// Whether the client waits for `100 Continue` before sending its body.
pub(crate) fn expects_continue(req: &Request) -> bool {
    req.minor_version() == 1
        && req
            .header("expect")
            .is_some_and(|v| trim(v).eq_ignore_ascii_case(b"100-continue"))
}

/// Whether the connection stays open after this request's response, as the client asked.
pub(crate) fn wants_keep_alive(req: &Request) -> bool {
    match req.header("connection") {
        Some(v) if has_token(v, "close") => false,
        Some(v) if has_token(v, "keep-alive") => true,
        _ => req.minor_version() == 1,
    }
}

/// What [`ChunkedDecoder::decode`] reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunkProgress {
    /// Everything given was consumed; the body goes on.
    NeedMore,
    /// The last chunk and the trailers are consumed; what is left belongs to the next request.
    Done,
}

/// Where the decoder is within a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkState {
    /// Expecting a chunk-size line.
    Size,
    /// Inside a chunk's data, this many bytes to go.
    Data(u64),
    /// Expecting the CRLF that ends a chunk's data.
    DataEnd,
    /// Expecting trailer lines, up to an empty line.
    Trailers,
    /// The body has ended.
    Done,
}

/// Decodes a `transfer-encoding: chunked` body incrementally: fed whatever bytes have arrived,
/// it consumes what it can, appends the data to the body, and says whether the body has ended.
/// The limits are the connection's: the decoded body may not exceed `max_body` (413), and
/// the trailers' total size the head limit (431).
#[derive(Debug)]
pub(crate) struct ChunkedDecoder {
    state: ChunkState,
    max_body: u64,
    max_trailers: usize,
    decoded: u64,
    trailers: usize,
    /// Bytes of the pending input already searched for a line end.
    scanned: usize,
}

impl ChunkedDecoder {
    /// A decoder at the start of a body.
    pub(crate) fn new(max_body: u64, max_trailers: usize) -> ChunkedDecoder {
        ChunkedDecoder {
            state: ChunkState::Size,
            max_body,
            max_trailers,
            decoded: 0,
            trailers: 0,
            scanned: 0,
        }
    }

    /// Consumes what it can of `input` (leaving the rest there), appending chunk data to `body`.
    pub(crate) fn decode(
        &mut self,
        input: &mut BytesMut,
        body: &mut BytesMut,
    ) -> Result<ChunkProgress, Refusal> {
        loop {
            match self.state {
                ChunkState::Done => return Ok(ChunkProgress::Done),
                ChunkState::Size => {
                    let Some(line) = self.line(input, MAX_CHUNK_LINE)? else {
                        return Ok(ChunkProgress::NeedMore);
                    };
                    let size = parse_size_line(&line)?;
                    if size == 0 {
                        self.state = ChunkState::Trailers;
                        continue;
                    }
                    if self.decoded + size > self.max_body {
                        return Err(Refusal(
                            StatusCode::CONTENT_TOO_LARGE,
                            "request body too large",
                        ));
                    }
                    self.decoded += size;
                    self.state = ChunkState::Data(size);
                }
                ChunkState::Data(left) => {
                    if input.is_empty() {
                        return Ok(ChunkProgress::NeedMore);
                    }
                    let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                    body.extend_from_slice(&input[..n]);
                    input.advance(n);
                    let left = left - n as u64;
                    self.state = if left == 0 {
                        ChunkState::DataEnd
                    } else {
                        ChunkState::Data(left)
                    };
                }
                ChunkState::DataEnd => {
                    if input.len() < 2 {
                        return Ok(ChunkProgress::NeedMore);
                    }
                    if &input[..2] != b"\r\n" {
                        return Err(Refusal(
                            StatusCode::BAD_REQUEST,
                            "chunk not followed by CRLF",
                        ));
                    }
                    input.advance(2);
                    self.state = ChunkState::Size;
                }
                ChunkState::Trailers => {
                    let Some(line) = self.line(input, self.max_trailers)? else {
                        return Ok(ChunkProgress::NeedMore);
                    };
                    if line.is_empty() {
                        self.state = ChunkState::Done;
                        continue;
                    }
                    if !is_field_line(&line) {
                        return Err(Refusal(StatusCode::BAD_REQUEST, "malformed trailer line"));
                    }
                    self.trailers += line.len() + 2;
                    if self.trailers > self.max_trailers {
                        return Err(Refusal(StatusCode::HEADERS_TOO_LARGE, "trailers too large"));
                    }
                }
            }
        }
    }

    /// Takes one CRLF-terminated line off `input` (returned without the CRLF), or `None` when
    /// no line end has arrived yet; a line longer than `max` bytes is refused.
    fn line(&mut self, input: &mut BytesMut, max: usize) -> Result<Option<Bytes>, Refusal> {
        let from = self.scanned.min(input.len());
        if let Some(i) = input[from..].windows(2).position(|w| w == b"\r\n") {
            let i = from + i;
            self.scanned = 0;
            let line = input.split_to(i + 2).freeze();
            return Ok(Some(line.slice(..i)));
        }
        if input.len() > max + 1 {
            return Err(Refusal(StatusCode::BAD_REQUEST, "line too long"));
        }
        self.scanned = input.len().saturating_sub(1);
        Ok(None)
    }
}

/// A chunk-size line as RFC 9112 section 7.1 and hyper take it: hex digits from the first byte
/// (no leading white space), optional spaces or tabs, then optionally `;` and extensions, which
/// are ignored but may not hold a line break or NUL (a bare LF there is a smuggling vector).
fn parse_size_line(line: &[u8]) -> Result<u64, Refusal> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    let size =
        parse_hex(&line[..digits]).ok_or(Refusal(StatusCode::BAD_REQUEST, "bad chunk size"))?;
    let rest = &line[digits..];
    let rest = &rest[rest
        .iter()
        .take_while(|&&b| b == b' ' || b == b'\t')
        .count()..];
    match rest.split_first() {
        None => Ok(size),
        Some((b';', ext)) if !ext.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0)) => Ok(size),
        Some((b';', _)) => Err(Refusal(
            StatusCode::BAD_REQUEST,
            "chunk extension holds a line break",
        )),
        Some(_) => Err(Refusal(StatusCode::BAD_REQUEST, "bad chunk size")),
    }
}

/// Whether a trailer line is a header field: a token, `:`, then a value without CR, LF or NUL.
fn is_field_line(line: &[u8]) -> bool {
    let Some(colon) = line.iter().position(|&b| b == b':') else {
        return false;
    };
    let (name, value) = (&line[..colon], &line[colon + 1..]);
    !name.is_empty()
        && name.iter().all(|&b| is_tchar(b))
        && !value.iter().any(|&b| matches!(b, b'\r' | b'\n' | 0))
}

/// A token character of RFC 9110 section 5.6.2.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// `v` without surrounding ASCII white space.
pub(crate) fn trim(v: &[u8]) -> &[u8] {
    v.trim_ascii()
}

/// Whether the comma-separated header value `v` lists `token` (case-insensitively).
pub(crate) fn has_token(v: &[u8], token: &str) -> bool {
    v.split(|&b| b == b',')
        .any(|t| trim(t).eq_ignore_ascii_case(token.as_bytes()))
}

/// A `content-length` value: decimal digits only, no sign, no spaces inside, fits in a u64.
pub(crate) fn parse_length(v: &[u8]) -> Option<u64> {
    let v = trim(v);
    if v.is_empty() || v.len() > 19 || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(v).ok()?.parse().ok()
}

/// A chunk size: 1 to 15 hex digits (15 keeps the sum of chunk sizes far from overflow).
fn parse_hex(v: &[u8]) -> Option<u64> {
    if v.is_empty() || v.len() > 15 || !v.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    u64::from_str_radix(std::str::from_utf8(v).ok()?, 16).ok()
}

#[cfg(test)]
mod tests;
