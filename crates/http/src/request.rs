//! `Request`: a parsed request head that borrows nothing (its strings are ranges into one shared
//! buffer), its body, and the path parameters the router matched.
//!
//! Header positions are kept inline up to 8; the target is a `ByteString` slice of the head that
//! httparse checked as UTF-8, kept without a second check (`target_of`, `unsafe` with `//
//! SAFETY:`). Also `Method`, query splitting and percent decoding.

use std::borrow::Cow;
use std::fmt;
use std::net::SocketAddr;
use std::ops::Range;

use bytes::Bytes;
use bytestring::ByteString;

/// An HTTP request method.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`: answered by the `GET` route when no `HEAD` route exists, without the body.
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `PATCH`
    Patch,
    /// `OPTIONS`
    Options,
    /// Any other token.
    Other(String),
}

impl Method {
    /// Parses a method token (case-sensitive, as RFC 9110 says).
    pub fn from_token(s: &str) -> Method {
        match s {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            other => Method::Other(other.to_owned()),
        }
    }

    /// The method's token.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Options => "OPTIONS",
            Method::Other(s) => s,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one header's name and value sit in the head's bytes. Offsets are `u32`: a head is
/// parsed from at most the first 4 GiB of the read buffer, so every offset fits.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeaderAt {
    name: (u32, u32),
    value: (u32, u32),
}

impl HeaderAt {
    /// Panics if an offset exceeds `u32::MAX` (the parser never passes one).
    pub(crate) fn new(name: Range<usize>, value: Range<usize>) -> HeaderAt {
        let at = |r: Range<usize>| {
            (
                u32::try_from(r.start).expect("head offsets fit in u32"),
                u32::try_from(r.end).expect("head offsets fit in u32"),
            )
        };
        HeaderAt {
            name: at(name),
            value: at(value),
        }
    }

    fn name(&self) -> Range<usize> {
        self.name.0 as usize..self.name.1 as usize
    }

    fn value(&self) -> Range<usize> {
        self.value.0 as usize..self.value.1 as usize
    }
}

/// A head's header positions: up to 8 (what curl, wrk and most API clients send) inside the
/// request's own allocation, more on the heap.
pub(crate) type HeaderRanges = smallvec::SmallVec<[HeaderAt; 8]>;

/// A request as a handler sees it: method, path, query, headers, body, matched path parameters.
///
/// The head's bytes are kept in one shared buffer and every string is a range into it, so parsing
/// a request allocates one small vector for the header ranges and the request itself: its parts
/// are boxed so that passing it from the parser to the router to the handler moves one pointer.
/// The target (path and query) is a slice of the same buffer checked to be UTF-8 once, when
/// parsed, so `path()`, `query()` and `target()` are free however often a request is routed.
#[derive(Clone)]
pub struct Request(Box<Parts>);

/// What a [`Request`] holds.
#[derive(Clone)]
struct Parts {
    method: Method,
    head: Bytes,
    /// Path and `?query` as sent: a slice of `head`, UTF-8 checked once.
    target: ByteString,
    /// The path: `target[..path_end]`.
    path_end: usize,
    /// Where the query starts in `target` (after the `?`), if there is one.
    query_start: Option<usize>,
    headers: HeaderRanges,
    minor_version: u8,
    body: Bytes,
    peer: Option<SocketAddr>,
    params: Vec<(String, String)>,
}

impl fmt::Debug for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Request")
            .field("method", &self.0.method)
            .field("target", &self.target())
            .field("headers", &self.0.headers.len())
            .field("body", &self.0.body.len())
            .field("params", &self.0.params)
            .finish()
    }
}

impl Request {
    /// A request parsed off the wire: `head` holds the bytes every range points into.
    pub(crate) fn from_head(
        method: Method,
        head: Bytes,
        path: Range<usize>,
        query: Option<Range<usize>>,
        headers: HeaderRanges,
        minor_version: u8,
        peer: Option<SocketAddr>,
    ) -> Request {
        let (target, path_end, query_start) = target_of(&head, path, query);
        Request(Box::new(Parts {
            method,
            head,
            target,
            path_end,
            query_start,
            headers,
            minor_version,
            body: Bytes::new(),
            peer,
            params: Vec::new(),
        }))
    }

    /// A request built by hand (for tests and for calling handlers directly). `target` is the
    /// path with an optional `?query`.
    pub fn new(method: Method, target: &str, headers: &[(&str, &str)], body: Bytes) -> Request {
        let mut head = Vec::new();
        head.extend_from_slice(target.as_bytes());
        let mut ranges = HeaderRanges::new();
        for (n, v) in headers {
            let ns = head.len();
            head.extend_from_slice(n.as_bytes());
            let vs = head.len();
            head.extend_from_slice(v.as_bytes());
            ranges.push(HeaderAt::new(ns..vs, vs..head.len()));
        }
        let (path, query) = split_target(0..target.len(), target.as_bytes());
        let mut req = Request::from_head(method, Bytes::from(head), path, query, ranges, 1, None);
        req.set_body(body);
        req
    }

    /// The method.
    pub fn method(&self) -> &Method {
        &self.0.method
    }

    /// The path, as sent (still percent-encoded), without the query.
    pub fn path(&self) -> &str {
        match &self.0.target[..self.0.path_end] {
            // An absolute-form target without a path (`http://host?q`) means `/`.
            "" => "/",
            p => p,
        }
    }

    /// The raw query string after `?`, or `""`.
    pub fn query(&self) -> &str {
        self.0.query_start.map_or("", |q| &self.0.target[q..])
    }

    /// The request target: path and `?query` as sent.
    pub fn target(&self) -> &str {
        &self.0.target
    }

    /// The target as an owned string sharing the request's buffer (no copy).
    pub(crate) fn target_string(&self) -> bytestring::ByteString {
        self.0.target.clone()
    }

    /// The query string decoded into `(name, value)` pairs, in order (`+` is a space, `%XX` a
    /// byte; a pair that does not decode to UTF-8 is skipped).
    pub fn query_pairs(&self) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
        parse_query(self.query())
    }

    /// The decoded value of the last query pair named `name` (what the last matching
    /// [`Request::query_pairs`] item holds), without decoding the other pairs.
    pub fn query_value(&self, name: &str) -> Option<Cow<'_, str>> {
        query_value(self.query(), name)
    }

    /// The first header with this name (ASCII case-insensitive), as bytes.
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.header_values(name).next()
    }

    /// The values of every header with this name (ASCII case-insensitive), in order. Names are
    /// compared as bytes, so looking up a header costs no UTF-8 check of the others.
    pub fn header_values<'a, 'n>(
        &'a self,
        name: &'n str,
    ) -> impl Iterator<Item = &'a [u8]> + use<'a, 'n> {
        self.0
            .headers
            .iter()
            .filter(|h| self.0.head[h.name()].eq_ignore_ascii_case(name.as_bytes()))
            .map(|h| &self.0.head[h.value()])
    }

    /// The first header with this name, if it is valid UTF-8.
    pub fn header_str(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok())
    }

    /// Every header in order, names as sent.
    pub fn headers(&self) -> impl Iterator<Item = (&str, &[u8])> + '_ {
        self.0
            .headers
            .iter()
            .map(|h| (self.str_at(h.name()), &self.0.head[h.value()]))
    }

    /// The request body (already read in full; chunked bodies are decoded).
    pub fn body(&self) -> &Bytes {
        &self.0.body
    }

    /// Takes the body out, leaving it empty.
    pub fn take_body(&mut self) -> Bytes {
        std::mem::take(&mut self.0.body)
    }

    /// A path parameter the router matched: `{name}` or `{*name}` in the route pattern.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.0
            .params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The peer's address, when the request came from a socket.
    pub fn peer(&self) -> Option<SocketAddr> {
        self.0.peer
    }

    /// HTTP minor version: 0 for HTTP/1.0, 1 for HTTP/1.1.
    pub fn minor_version(&self) -> u8 {
        self.0.minor_version
    }

    pub(crate) fn set_params(&mut self, params: Vec<(String, String)>) {
        self.0.params = params;
    }

    /// Sets the peer address (tests of peer-dependent handlers).
    #[cfg(test)]
    pub(crate) fn set_peer(&mut self, peer: Option<SocketAddr>) {
        self.0.peer = peer;
    }

    /// This request as if it came from `peer`: for tests of handlers that answer loopback
    /// peers only, and for embedders that build requests themselves.
    ///
    /// # Examples
    /// ```
    /// use bytes::Bytes;
    /// use galleon_http::{Method, Request};
    ///
    /// let req = Request::new(Method::Get, "/", &[], Bytes::new())
    ///     .with_peer("192.0.2.7:5000".parse().unwrap());
    /// assert!(!req.peer().unwrap().ip().is_loopback());
    /// ```
    pub fn with_peer(mut self, peer: SocketAddr) -> Request {
        self.0.peer = Some(peer);
        self
    }

    pub(crate) fn set_body(&mut self, body: Bytes) {
        self.0.body = body;
    }

    fn str_at(&self, r: Range<usize>) -> &str {
        // Every range stored was checked to be UTF-8 (ASCII, in fact) when parsed.
        std::str::from_utf8(&self.0.head[r]).unwrap_or("")
    }
}

/// The target (`path` up to the end of `query`) of `head` as one string, with the path's end and
/// the query's start relative to it. Every caller's target is already known to be UTF-8:
/// httparse checks a request line's target as UTF-8 (and refuses it otherwise), and
/// [`Request::new`] takes a `&str`; both cut it only next to ASCII bytes (`/`, `?`). So it is
/// not checked a second time: on a small page that check showed in instruction profiles.
#[allow(unsafe_code)]
fn target_of(
    head: &Bytes,
    path: Range<usize>,
    query: Option<Range<usize>>,
) -> (ByteString, usize, Option<usize>) {
    let end = query.as_ref().map_or(path.end, |q| q.end);
    let bytes = head.slice(path.start..end);
    debug_assert!(std::str::from_utf8(&bytes).is_ok());
    // SAFETY: `bytes` is valid UTF-8. A parsed head's target is what httparse returned as a
    // `&str` (validated with `str::from_utf8`); a hand-built request's is a `&str`. Both are cut
    // only at ASCII bytes (`origin_part` after the authority at `/` or `?`, `split_target` at
    // `?`), and an ASCII byte never occurs inside a multi-byte UTF-8 sequence, so every cut is
    // on a character boundary. Tested by `non_ascii_targets_keep_their_text`.
    let target = unsafe { ByteString::from_bytes_unchecked(bytes) };
    (
        target,
        path.end - path.start,
        query.map(|q| q.start - path.start),
    )
}

pub(crate) fn split_target(
    target: Range<usize>,
    buf: &[u8],
) -> (Range<usize>, Option<Range<usize>>) {
    match buf[target.clone()].iter().position(|&b| b == b'?') {
        Some(q) => (
            target.start..target.start + q,
            Some(target.start + q + 1..target.end),
        ),
        None => (target, None),
    }
}

/// Decodes `%XX` escapes (and, when `plus_is_space`, `+` as a space). `None` on a bad escape or
/// a result that is not UTF-8.
pub fn percent_decode(s: &str, plus_is_space: bool) -> Option<Cow<'_, str>> {
    let b = s.as_bytes();
    if !b.iter().any(|&c| c == b'%' || (plus_is_space && c == b'+')) {
        return Some(Cow::Borrowed(s));
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hi = hex_val(*b.get(i + 1)?)?;
                let lo = hex_val(*b.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 3;
            }
            b'+' if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().map(Cow::Owned)
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Splits a query string into decoded pairs; `a` alone is `("a", "")`; bad pairs are skipped.
pub fn parse_query(q: &str) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    split_query(q).filter_map(|(k, v)| Some((percent_decode(k, true)?, percent_decode(v, true)?)))
}

/// The decoded value of the last pair of `q` named `name`, as `parse_query` would give it (pairs
/// that do not decode are skipped), decoding only the names that need it and the value found.
pub fn query_value<'q>(q: &'q str, name: &str) -> Option<Cow<'q, str>> {
    if !q.bytes().any(|b| b == b'%' || b == b'+') {
        // Nothing to decode (the usual `?iters=10`): every pair is its own decoding.
        return split_query(q)
            .filter(|(k, _)| *k == name)
            .last()
            .map(|(_, v)| Cow::Borrowed(v));
    }
    let mut found = None;
    for (k, v) in split_query(q) {
        let named = if k.bytes().any(|b| b == b'%' || b == b'+') {
            percent_decode(k, true).is_some_and(|k| k == name)
        } else {
            k == name
        };
        if named && let Some(v) = percent_decode(v, true) {
            found = Some(v);
        }
    }
    found
}

/// The raw `(name, value)` of each non-empty `&`-separated pair; `a` alone is `("a", "")`.
/// A query string's `(key, value)` pairs as they are, not decoded (empty pairs skipped, a pair
/// without `=` has an empty value): for callers that decode with rules of their own, e.g.
/// refusing a bad escape instead of skipping its pair as [`parse_query`] does.
pub fn split_query(q: &str) -> impl Iterator<Item = (&str, &str)> {
    // Split on bytes: a `char` pattern searches with a `memcmp` call per candidate, which showed
    // in profiles of small pages.
    let mut rest = Some(q);
    let pairs = std::iter::from_fn(move || {
        let s = rest?;
        match s.bytes().position(|b| b == b'&') {
            Some(i) => {
                rest = Some(&s[i + 1..]);
                Some(&s[..i])
            }
            None => {
                rest = None;
                Some(s)
            }
        }
    });
    pairs
        .filter(|p| !p.is_empty())
        .map(|p| match p.bytes().position(|b| b == b'=') {
            Some(i) => (&p[..i], &p[i + 1..]),
            None => (p, ""),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_match_names_in_any_case_in_order() {
        let r = Request::new(
            Method::Get,
            "/",
            &[("Host", "a"), ("x-n", "1"), ("HOST", "b"), ("X-N", "2")],
            Bytes::new(),
        );
        assert_eq!(r.header_values("host").collect::<Vec<_>>(), [b"a", b"b"]);
        assert_eq!(r.header_values("X-n").collect::<Vec<_>>(), [b"1", b"2"]);
        assert_eq!(r.header_values("content-length").count(), 0);
        assert_eq!(r.header("x-N"), Some(&b"1"[..]));
    }

    #[test]
    fn path_query_and_target_come_from_the_target() {
        for (target, path, query) in [
            ("/a/b?x=1&y", "/a/b", "x=1&y"),
            ("/a", "/a", ""),
            ("/a?", "/a", ""),
            ("/%C3%A9?q=%20", "/%C3%A9", "q=%20"),
            ("/caf\u{e9}?\u{e9}=1", "/caf\u{e9}", "\u{e9}=1"),
        ] {
            let r = Request::new(Method::Get, target, &[("host", "h")], Bytes::new());
            assert_eq!((r.path(), r.query(), r.target()), (path, query, target));
        }
    }

    #[test]
    fn query_strings_split_into_decoded_pairs() {
        let q = |s: &str| {
            parse_query(s)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect::<Vec<_>>()
        };
        let p = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(q(""), vec![]);
        assert_eq!(q("&&"), vec![]);
        assert_eq!(q("a"), vec![p("a", "")]);
        assert_eq!(q("a=1&&b=2&"), vec![p("a", "1"), p("b", "2")]);
        assert_eq!(q("=x&a=b=c"), vec![p("", "x"), p("a", "b=c")]);
        assert_eq!(
            q("k%3D=v%26w&x+y=%E2%9C%93"),
            vec![p("k=", "v&w"), p("x y", "✓")]
        );
        // A pair that is not UTF-8 once decoded, or has a broken escape, is skipped alone.
        assert_eq!(q("a=%FF&b=%zz&c=3"), vec![p("c", "3")]);
        assert_eq!(q("é=ü&z"), vec![p("é", "ü"), p("z", "")]);
    }

    #[test]
    fn query_value_is_the_last_decoded_pair_of_that_name() {
        let queries = [
            "",
            "a",
            "a=",
            "a=1",
            "a=1&a=2",
            "a=1&a=%zz",
            "a=1&a=%FF",
            "b=1&a=2&b=3",
            "a%3D=1",
            "a+b=1&a b=2",
            "a%20b=3",
            "%61=4&a=5&%61=6",
            "x=&&a&",
            "a=b=c",
            "=x&a=1",
            "é=ü&é=ö",
            "a=%2&a=ok",
            "a=1&%zz=2",
            "a=+%2B+",
        ];
        for q in queries {
            for name in ["a", "b", "a b", "a=", "", "é", "x", "z"] {
                let by_pairs = parse_query(q)
                    .filter(|(k, _)| k == name)
                    .last()
                    .map(|(_, v)| v.into_owned());
                let direct = query_value(q, name).map(Cow::into_owned);
                assert_eq!(direct, by_pairs, "{q:?} {name:?}");
            }
        }
        assert_eq!(query_value("a=1&a=2", "a").as_deref(), Some("2"));
        // Nothing to decode: borrowed from the query.
        assert!(matches!(
            query_value("iters=10", "iters"),
            Some(Cow::Borrowed("10"))
        ));
    }

    #[test]
    fn percent_decoding_rejects_bad_escapes() {
        assert_eq!(percent_decode("a%2Fb", false).as_deref(), Some("a/b"));
        assert_eq!(percent_decode("a+b", false).as_deref(), Some("a+b"));
        assert_eq!(percent_decode("%zz", false), None);
        assert_eq!(percent_decode("%4", false), None);
        assert_eq!(percent_decode("%ff", false), None, "not UTF-8");
    }
}
