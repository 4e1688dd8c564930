//! Byte-level tests of request framing: no sockets.

use std::borrow::Cow;

use super::*;

fn head_of(raw: &[u8]) -> Request {
    let (len, head) = parse_head(raw, 16).unwrap().unwrap();
    head.into_request(Bytes::copy_from_slice(&raw[..len]), None)
}

#[test]
fn parses_target_and_headers_as_ranges() {
    let raw = b"GET /blah?iters=10&x=a+b%21 HTTP/1.1\r\nHost: h\r\nX-Y: z\r\n\r\nrest";
    let (len, head) = parse_head(raw, 8).unwrap().unwrap();
    assert_eq!(&raw[len..], b"rest");
    let req = head.into_request(Bytes::copy_from_slice(&raw[..len]), None);
    assert_eq!(req.method(), &Method::Get);
    assert_eq!(req.path(), "/blah");
    assert_eq!(req.query(), "iters=10&x=a+b%21");
    assert_eq!(req.target(), "/blah?iters=10&x=a+b%21");
    assert_eq!(req.header("host"), Some(&b"h"[..]));
    assert_eq!(req.header_str("x-y"), Some("z"));
    assert_eq!(
        req.query_pairs().collect::<Vec<_>>(),
        vec![("iters".into(), "10".into()), ("x".into(), "a b!".into())]
    );
    // Nothing to decode: borrowed from the head, not allocated.
    assert!(matches!(
        req.query_pairs().next(),
        Some((Cow::Borrowed(_), Cow::Borrowed(_)))
    ));
}

#[test]
fn partial_and_malformed_heads() {
    assert!(
        parse_head(b"GET / HTTP/1.1\r\nHost: h\r\n", 8)
            .unwrap()
            .is_none()
    );
    assert_eq!(
        parse_head(b"GET / HTTP/1.1\r\nBad Header\r\n\r\n", 8).unwrap_err(),
        HeadError::Malformed
    );
    assert_eq!(
        parse_head(b"\x00\x01\x02 / HTTP/1.1\r\n\r\n", 8).unwrap_err(),
        HeadError::Malformed
    );
    let many = b"GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\n\r\n";
    assert_eq!(parse_head(many, 2).unwrap_err(), HeadError::TooManyHeaders);
}

#[test]
fn a_head_is_partial_until_its_last_byte() {
    let raw = b"POST /streams/a?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc";
    let full = raw.len() - 3;
    for cut in 0..full {
        assert!(
            parse_head(&raw[..cut], 8).unwrap().is_none(),
            "cut at {cut}"
        );
    }
    for end in full..=raw.len() {
        let (len, _) = parse_head(&raw[..end], 8).unwrap().unwrap();
        assert_eq!(len, full);
    }
}

#[test]
fn lengths_and_sizes() {
    assert_eq!(parse_length(b"0"), Some(0));
    assert_eq!(parse_length(b" 42 "), Some(42));
    assert_eq!(parse_length(b"+1"), None);
    assert_eq!(parse_length(b"-1"), None);
    assert_eq!(parse_length(b"1 2"), None);
    assert_eq!(parse_length(b""), None);
    assert_eq!(parse_length(b"99999999999999999999"), None);
    assert_eq!(parse_hex(b"1f4"), Some(500));
    assert_eq!(parse_hex(b"0x10"), None);
    assert_eq!(parse_hex(b"ffffffffffffffff"), None);
    assert!(has_token(b"keep-alive, Upgrade", "upgrade"));
    assert!(!has_token(b"closed", "close"));
}

#[test]
fn body_framing_follows_rfc_9112() {
    let f = |raw: &str| body_framing(&head_of(raw.as_bytes()), 100);
    assert_eq!(f("GET / HTTP/1.1\r\n\r\n"), Ok(BodyFraming::None));
    assert_eq!(
        f("POST / HTTP/1.1\r\ncontent-length: 7\r\n\r\n"),
        Ok(BodyFraming::Length(7))
    );
    assert_eq!(
        f("POST / HTTP/1.1\r\ncontent-length: 7\r\nContent-Length: 7\r\n\r\n"),
        Ok(BodyFraming::Length(7))
    );
    assert_eq!(
        f("POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n"),
        Ok(BodyFraming::Chunked)
    );
    let refused = |raw: &str| f(raw).unwrap_err();
    assert_eq!(
        refused("POST / HTTP/1.1\r\ncontent-length: 7\r\ncontent-length: 8\r\n\r\n").1,
        "conflicting content-length headers"
    );
    assert_eq!(
        refused("POST / HTTP/1.1\r\ncontent-length: x\r\n\r\n").1,
        "bad content-length"
    );
    assert_eq!(
        refused("POST / HTTP/1.1\r\ncontent-length: 101\r\n\r\n").0,
        StatusCode::CONTENT_TOO_LARGE
    );
    assert_eq!(
        refused("POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n").1,
        "both content-length and transfer-encoding"
    );
    assert_eq!(
        refused(
            "POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ntransfer-encoding: chunked\r\n\r\n"
        )
        .1,
        "more than one transfer-encoding header"
    );
    assert_eq!(
        refused("POST / HTTP/1.0\r\ntransfer-encoding: chunked\r\n\r\n").1,
        "transfer-encoding in an HTTP/1.0 request"
    );
    assert_eq!(
        refused("POST / HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n").0,
        StatusCode::NOT_IMPLEMENTED
    );
}

#[test]
fn keep_alive_and_continue() {
    assert!(wants_keep_alive(&head_of(b"GET / HTTP/1.1\r\n\r\n")));
    assert!(!wants_keep_alive(&head_of(
        b"GET / HTTP/1.1\r\nConnection: Close\r\n\r\n"
    )));
    assert!(!wants_keep_alive(&head_of(b"GET / HTTP/1.0\r\n\r\n")));
    assert!(wants_keep_alive(&head_of(
        b"GET / HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"
    )));
    assert!(expects_continue(&head_of(
        b"POST / HTTP/1.1\r\nExpect: 100-Continue\r\n\r\n"
    )));
    assert!(!expects_continue(&head_of(
        b"POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n"
    )));
}

/// Feeds `wire` to a fresh decoder `step` bytes at a time; returns the body and what was left
/// after the end, or the refusal.
fn decode_in_steps(wire: &[u8], step: usize, max: u64) -> Result<(Vec<u8>, Vec<u8>), Refusal> {
    let mut dec = ChunkedDecoder::new(max, 64);
    let mut input = BytesMut::new();
    let mut body = BytesMut::new();
    let mut fed = 0;
    loop {
        match dec.decode(&mut input, &mut body)? {
            ChunkProgress::Done => {
                input.extend_from_slice(&wire[fed..]);
                return Ok((body.to_vec(), input.to_vec()));
            }
            ChunkProgress::NeedMore => {
                assert!(fed < wire.len(), "decoder wants more than the whole body");
                let end = (fed + step).min(wire.len());
                input.extend_from_slice(&wire[fed..end]);
                fed = end;
            }
        }
    }
}

/// Decodes `wire` whole and in every step size from 1 byte up, asserting all agree.
fn decode_every_way(wire: &[u8], max: u64) -> Result<(Vec<u8>, Vec<u8>), Refusal> {
    let whole = decode_in_steps(wire, wire.len().max(1), max);
    for step in 1..wire.len() {
        assert_eq!(decode_in_steps(wire, step, max), whole, "step {step}");
    }
    whole
}

#[test]
fn chunked_bodies_decode_the_same_at_every_split() {
    let (body, rest) =
        decode_every_way(b"5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\nGET /next", 100).unwrap();
    assert_eq!(body, b"hello, world");
    assert_eq!(
        rest, b"GET /next",
        "what follows the body is left for the next request"
    );
    let (body, _) = decode_every_way(b"A;name=value\r\n0123456789\r\n0;x\r\n\r\n", 100).unwrap();
    assert_eq!(body, b"0123456789", "extensions are ignored");
    let (body, rest) =
        decode_every_way(b"3\r\nabc\r\n0\r\nx-sum: 1\r\nx-b: 2\r\n\r\n", 100).unwrap();
    assert_eq!(
        (body.as_slice(), rest.as_slice()),
        (&b"abc"[..], &b""[..]),
        "trailers are consumed"
    );
    let (body, _) = decode_every_way(b"0\r\n\r\n", 100).unwrap();
    assert!(body.is_empty());
}

#[test]
fn chunked_errors_at_every_split() {
    let refused = |wire: &[u8], max: u64| decode_every_way(wire, max).unwrap_err();
    assert_eq!(refused(b"zz\r\n", 100).1, "bad chunk size");
    assert_eq!(refused(b"\r\n", 100).1, "bad chunk size");
    assert_eq!(
        refused(b"1000000000000000\r\n", u64::MAX).1,
        "bad chunk size"
    );
    assert_eq!(
        refused(b"5\r\nhelloXY", 100).1,
        "chunk not followed by CRLF"
    );
    let too_big = refused(b"5\r\nhello\r\n6\r\n", 10);
    assert_eq!(
        too_big,
        Refusal(StatusCode::CONTENT_TOO_LARGE, "request body too large")
    );
    let long_line = [b"1;".as_slice(), &[b'x'; MAX_CHUNK_LINE + 8]].concat();
    assert_eq!(
        decode_in_steps(&long_line, 64, 100).unwrap_err().1,
        "line too long"
    );
    let trailers = [
        b"0\r\n".as_slice(),
        &b"x-a: 1234567890\r\n".repeat(5),
        b"\r\n",
    ]
    .concat();
    assert_eq!(
        refused(&trailers, 100),
        Refusal(StatusCode::HEADERS_TOO_LARGE, "trailers too large")
    );
}

#[test]
fn paths_stay_percent_encoded_until_routed() {
    let req = head_of(b"GET /a%20b HTTP/1.1\r\n\r\n");
    assert_eq!(req.path(), "/a%20b");
    assert!(req.query_pairs().next().is_none());
}

/// Regression (issue 13, class 5): the decoder took a bare LF in a chunk extension, leading
/// spaces in a chunk size and non-field trailer lines, so a pipelined request after a body
/// missing its last CRLF was swallowed as trailers and never answered. hyper rejects all of
/// these; so does galleon now.
#[test]
fn chunked_framing_is_strict() {
    let refused = |wire: &[u8]| decode_every_way(wire, 100).unwrap_err();
    assert_eq!(refused(b" 5\r\nhello\r\n0\r\n\r\n").1, "bad chunk size");
    assert_eq!(refused(b"\t5\r\nhello\r\n0\r\n\r\n").1, "bad chunk size");
    assert_eq!(refused(b"5x\r\nhello\r\n0\r\n\r\n").1, "bad chunk size");
    assert_eq!(
        refused(b"5;a\nb\r\nhello\r\n0\r\n\r\n").1,
        "chunk extension holds a line break"
    );
    assert_eq!(
        refused(b"5;a\rb\r\nhello\r\n0\r\n\r\n").1,
        "chunk extension holds a line break"
    );
    assert_eq!(
        refused(b"0\r\nnot a field\r\n\r\n").1,
        "malformed trailer line"
    );
    assert_eq!(
        refused(b"0\r\n: no name\r\n\r\n").1,
        "malformed trailer line"
    );
    assert_eq!(
        refused(b"0\r\nx-a: 1\nx-b: 2\r\n\r\n").1,
        "malformed trailer line"
    );
    // The last CRLF missing, the next request follows: refused, not swallowed as trailers.
    assert_eq!(
        refused(b"0\r\nGET /next HTTP/1.1\r\nhost: x\r\n\r\n").1,
        "malformed trailer line"
    );
    // What RFC 9112 allows still passes: white space before `;`, extensions, field trailers.
    let (body, rest) =
        decode_every_way(b"5 ;a=\"b c\"\r\nhello\r\n0\t\r\nx-sum: 1\r\n\r\nGET", 100).unwrap();
    assert_eq!(
        (body.as_slice(), rest.as_slice()),
        (&b"hello"[..], &b"GET"[..])
    );
}

/// Regression (issue 13, class 11): a duplicate or invalid `Host` was accepted.
#[test]
fn host_rules_follow_rfc_9112() {
    let host = |raw: &str| check_host(&head_of(raw.as_bytes()));
    for ok in [
        "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: 127.0.0.1:4000\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: [::1]:4000\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: \r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",
    ] {
        assert_eq!(host(ok), Ok(()), "{ok:?}");
    }
    for (bad, why) in [
        ("GET / HTTP/1.1\r\n\r\n", "missing host header"),
        (
            "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n",
            "more than one host header",
        ),
        (
            "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n",
            "more than one host header",
        ),
        ("GET / HTTP/1.1\r\nHost: a b\r\n\r\n", "invalid host header"),
        ("GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", "invalid host header"),
        (
            "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n",
            "invalid host header",
        ),
        (
            "GET / HTTP/1.1\r\nHost: a:80x\r\n\r\n",
            "invalid host header",
        ),
        (
            "GET / HTTP/1.1\r\nHost: [zz]\r\n\r\n",
            "invalid host header",
        ),
    ] {
        assert_eq!(host(bad).unwrap_err().1, why, "{bad:?}");
    }
}

/// Regression (issue 13, class 11): absolute-form targets were routed by their whole text (404).
#[test]
fn absolute_form_targets_are_routed_by_their_path() {
    for (raw, path, query) in [
        (
            "GET http://example.com/blah?iters=2 HTTP/1.1\r\nHost: example.com\r\n\r\n",
            "/blah",
            "iters=2",
        ),
        (
            "GET HTTPS://example.com:8443/a/b HTTP/1.1\r\nHost: x\r\n\r\n",
            "/a/b",
            "",
        ),
        (
            "GET http://example.com HTTP/1.1\r\nHost: x\r\n\r\n",
            "/",
            "",
        ),
        (
            "GET http://example.com?q=1 HTTP/1.1\r\nHost: x\r\n\r\n",
            "/",
            "q=1",
        ),
        ("GET /plain?x HTTP/1.1\r\nHost: x\r\n\r\n", "/plain", "x"),
        ("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n", "*", ""),
    ] {
        let req = head_of(raw.as_bytes());
        assert_eq!((req.path(), req.query()), (path, query), "{raw:?}");
    }
}

/// The target is checked as UTF-8 once (by httparse) and kept unchecked after that: text with
/// multi-byte characters keeps every byte, in origin and absolute form, and a target that is
/// not UTF-8 is refused before a request exists.
#[test]
fn non_ascii_targets_keep_their_text() {
    let cases = [
        ("/é?ü=ö", "/é", "ü=ö"),
        ("http://hé.example/ж/x?q=日本", "/ж/x", "q=日本"),
        ("http://hé.example?q=€", "/", "q=€"),
        ("/€€€/€", "/€€€/€", ""),
    ];
    for (target, path, query) in cases {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: h\r\n\r\n");
        let req = head_of(raw.as_bytes());
        assert_eq!((req.path(), req.query()), (path, query), "{target}");
        assert!(req.target().ends_with(query), "{target}");
    }
    let mut bad = b"GET /a".to_vec();
    bad.extend_from_slice(&[0xC3, 0x28]);
    bad.extend_from_slice(b" HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(parse_head(&bad, 8).unwrap_err(), HeadError::Malformed);
    let mut cut = b"GET /a".to_vec();
    cut.extend_from_slice(&[0xE2, 0x82]);
    cut.extend_from_slice(b"?x HTTP/1.1\r\nHost: h\r\n\r\n");
    assert_eq!(parse_head(&cut, 8).unwrap_err(), HeadError::Malformed);
}
