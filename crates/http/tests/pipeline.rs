//! Pipelined requests: the responses to requests that arrive together go out together, in
//! order, in one gathered write (within `Limits::pipeline_batch_bytes` and the iovec limit), and
//! whatever else a connection writes (a stream, an error) still comes after the answers before it.

mod common;

use std::io::Write;
use std::sync::{Arc, Mutex};

use common::{Probes, TestServer, read_to_close, test_router};
use galleon_http::{Exchange, Limits, Observer, ServerConfig};

/// Each exchange's status and write calls.
#[derive(Debug, Default)]
struct Writes(Mutex<Vec<(u16, u64, u64, bool)>>);

impl Observer for Writes {
    fn exchange(&self, e: &Exchange<'_>) {
        self.0
            .lock()
            .unwrap()
            .push((e.status, e.writes.syscalls, e.writes.bytes, e.completed));
    }
}

impl Writes {
    fn seen(&self) -> Vec<(u16, u64, u64, bool)> {
        self.0.lock().unwrap().clone()
    }
    fn syscalls(&self) -> u64 {
        self.seen().iter().map(|e| e.1).sum()
    }
}

fn config(batch_bytes: usize) -> ServerConfig {
    let mut limits = Limits::default();
    limits.pipeline_batch_bytes = batch_bytes;
    let mut c = ServerConfig::default();
    c.limits = limits;
    c
}

fn start(batch_bytes: usize) -> (TestServer, Arc<Writes>) {
    let w = Arc::new(Writes::default());
    let router = test_router(Arc::new(Probes::default()), None);
    let s = TestServer::start_observed(router, config(batch_bytes), w.clone());
    (s, w)
}

/// `n` requests for `path(i)` in one buffer, the last asking to close.
fn pipelined(n: usize, path: impl Fn(usize) -> String) -> Vec<u8> {
    let mut raw = Vec::new();
    for i in 0..n {
        let close = if i + 1 == n {
            "connection: close\r\n"
        } else {
            ""
        };
        raw.extend_from_slice(
            format!("GET {} HTTP/1.1\r\nhost: t\r\n{close}\r\n", path(i)).as_bytes(),
        );
    }
    raw
}

/// Sends `raw` in one write and reads until the server closes.
fn exchange(s: &TestServer, raw: &[u8]) -> String {
    let mut c = s.connect();
    c.write_all(raw).unwrap();
    read_to_close(&mut c)
}

/// Reads from `c` until what it read holds `needle` (the socket's read timeout fails the test
/// instead of a hang).
fn read_until(c: &mut std::net::TcpStream, needle: &str) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains(needle) {
        let n =
            std::io::Read::read(c, &mut buf).unwrap_or_else(|e| panic!("{needle:?} not read: {e}"));
        assert!(n > 0, "closed before {needle:?}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// Where each of `needles` is in `hay`, failing if one is missing or out of order.
fn in_order(hay: &str, needles: &[String]) {
    let mut from = 0;
    for n in needles {
        let at = hay[from..]
            .find(n.as_str())
            .unwrap_or_else(|| panic!("{n:?} missing or out of order in {hay:?}"));
        from += at + n.len();
    }
}

#[test]
fn sixteen_pipelined_requests_are_answered_in_order_in_one_write() {
    let (s, w) = start(galleon_http::DEFAULT_PIPELINE_BATCH_BYTES);
    let answer = exchange(&s, &pipelined(16, |i| format!("/sync?{i}")));
    let bodies: Vec<String> = (0..16).map(|i| format!("\r\n\r\nsync {i}")).collect();
    in_order(&answer, &bodies);
    assert_eq!(answer.matches("HTTP/1.1 200 OK").count(), 16);
    drop(s);
    let seen = w.seen();
    assert_eq!(seen.len(), 16, "{seen:?}");
    assert!(seen.iter().all(|e| e.0 == 200 && e.3), "{seen:?}");
    assert_eq!(
        w.syscalls(),
        1,
        "one gathered write for the sixteen: {seen:?}"
    );
    let bytes: u64 = seen.iter().map(|e| e.2).sum();
    assert_eq!(bytes, answer.len() as u64);
}

#[test]
fn with_batching_off_every_response_is_its_own_write() {
    let (s, w) = start(0);
    let answer = exchange(&s, &pipelined(16, |i| format!("/sync?{i}")));
    let bodies: Vec<String> = (0..16).map(|i| format!("\r\n\r\nsync {i}")).collect();
    in_order(&answer, &bodies);
    drop(s);
    let seen = w.seen();
    assert!(seen.iter().all(|e| e.1 == 1), "{seen:?}");
    assert_eq!(w.syscalls(), 16);
}

#[test]
fn a_batch_goes_out_once_it_holds_its_bytes() {
    // One answer's size, alone on its connection.
    let (s, _) = start(0);
    let one = exchange(&s, b"GET /hello HTTP/1.1\r\nhost: t\r\n\r\nGET /hello HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    let first = one.len() - one[1..].find("HTTP/1.1").unwrap() - 1;
    let size = one.len() - first;
    drop(s);
    // Room for three answers: every fourth fills the batch and sends it.
    let (s, w) = start(3 * size + 1);
    let answer = exchange(&s, &pipelined(16, |_| "/hello".to_owned()));
    assert_eq!(answer.matches("\r\n\r\nhello").count(), 16, "{answer}");
    drop(s);
    assert_eq!(w.syscalls(), 4, "{:?}", w.seen());
}

#[test]
fn a_stream_and_an_error_come_after_the_answers_before_them() {
    let (s, w) = start(galleon_http::DEFAULT_PIPELINE_BATCH_BYTES);
    let mut raw = pipelined(2, |i| format!("/sync?a{i}"));
    // `pipelined` ends with a close: take it off, so more requests follow.
    let text = String::from_utf8(raw)
        .unwrap()
        .replace("connection: close\r\n", "");
    raw = text.into_bytes();
    raw.extend_from_slice(b"GET /stream?n=1 HTTP/1.1\r\nhost: t\r\n\r\n");
    raw.extend_from_slice(b"GET /sync?b HTTP/1.1\r\nhost: t\r\n\r\n");
    raw.extend_from_slice(b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 4\r\n\r\nping");
    raw.extend_from_slice(b"GET / HTTP/1.1\r\nbad header line\r\n\r\n");
    let answer = exchange(&s, &raw);
    in_order(
        &answer,
        &[
            "sync a0".to_owned(),
            "sync a1".to_owned(),
            "transfer-encoding: chunked".to_owned(),
            "sync b".to_owned(),
            "x-len: 4".to_owned(),
            "\r\n\r\nping".to_owned(),
            "HTTP/1.1 400".to_owned(),
        ],
    );
    drop(s);
    let statuses: Vec<u16> = w.seen().iter().map(|e| e.0).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 200, 400]);
}

#[test]
fn a_body_still_to_come_sends_the_answers_before_it_first() {
    let (s, _) = start(galleon_http::DEFAULT_PIPELINE_BATCH_BYTES);
    let mut c = s.connect();
    c.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    // A request, then the head of one whose body the client sends only once it has the first
    // answer: the first must not wait in the batch for the second.
    c.write_all(b"GET /sync?first HTTP/1.1\r\nhost: t\r\n\r\nPOST /echo HTTP/1.1\r\nhost: t\r\nconnection: close\r\ncontent-length: 4\r\n\r\n")
        .unwrap();
    read_until(&mut c, "sync first");
    c.write_all(b"pong").unwrap();
    let rest = read_to_close(&mut c);
    assert!(rest.contains("\r\n\r\npong"), "{rest}");
}

#[test]
fn answers_do_not_wait_for_a_handler_that_is_not_ready() {
    // `/gate` answers only once the test has read the answer to the request before it.
    let (open, gate) = tokio::sync::oneshot::channel::<()>();
    let gate = Arc::new(Mutex::new(Some(gate)));
    let router = test_router(Arc::new(Probes::default()), None).get(
        "/gate",
        move |_r: galleon_http::Request| {
            let gate = gate.lock().unwrap().take();
            async move {
                if let Some(g) = gate {
                    let _ = g.await;
                }
                galleon_http::Response::html("gate open")
            }
        },
    );
    let s = TestServer::start(router, config(galleon_http::DEFAULT_PIPELINE_BATCH_BYTES));
    let mut c = s.connect();
    c.set_read_timeout(Some(common::READ_TIMEOUT)).unwrap();
    c.write_all(b"GET /sync?before HTTP/1.1\r\nhost: t\r\n\r\nGET /gate HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .unwrap();
    read_until(&mut c, "sync before");
    open.send(()).unwrap();
    let rest = read_to_close(&mut c);
    assert!(rest.contains("gate open"), "{rest}");
}
