//! Connection upgrades: `101 Switching Protocols`, then the socket belongs to the handler's
//! callback (an echo here), with and without bulk writers.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{READ_TIMEOUT, TestServer, read_to_close, status_of};
use futures::StreamExt;
use galleon_http::{
    Body, Exchange, IoList, Observer, Request, Response, Router, ServerConfig, StatusCode,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const UPGRADE: &[u8] =
    b"GET /echo HTTP/1.1\r\nhost: t\r\nconnection: Upgrade\r\nupgrade: echo/1\r\n\r\n";

/// `/echo`: upgrades to an echo of what the client sends (first the bytes read ahead);
/// `/unasked`: upgrades without checking the request; `/bye`: after the upgrade waits for the
/// server to stop (the signal taken before the socket), then says `bye`; `/stubborn`: after the upgrade never returns;
/// `/hello` and `/stream`: ordinary responses. `calls` counts callbacks run.
fn router(calls: Arc<AtomicUsize>) -> Router {
    let c1 = calls.clone();
    let c2 = calls.clone();
    let c3 = calls;
    Router::new()
        .get("/hello", |_r: Request| async {
            Response::text(StatusCode::OK, "hello")
        })
        .get("/stream", |_r: Request| async {
            let chunks = futures::stream::iter(["a", "b"]).map(|s| Ok(IoList::from(s)));
            Response::new(StatusCode::OK, Body::stream(chunks))
        })
        .get("/echo", move |req: Request| {
            let calls = c1.clone();
            async move {
                if !req.wants_upgrade("echo") {
                    return Response::error(StatusCode(426), "upgrade to echo");
                }
                Response::upgrade(&req, move |up| async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    let (mut stream, early) = up.into_parts();
                    if stream.write_all(&early).await.is_err() {
                        return;
                    }
                    let mut buf = [0u8; 4096];
                    while let Ok(n @ 1..) = stream.read(&mut buf).await {
                        if stream.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                    }
                })
                .with_header("upgrade", "echo")
                .with_header("connection", "upgrade")
                .with_header("sec-websocket-accept", "token")
            }
        })
        .get("/unasked", move |req: Request| {
            let calls = c2.clone();
            async move {
                Response::upgrade(&req, move |_up| async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                })
            }
        })
        .get("/bye", move |req: Request| {
            let calls = c3.clone();
            async move {
                Response::upgrade(&req, move |up| async move {
                    calls.fetch_add(1, Ordering::SeqCst);
                    // The owned signal, as a WebSocket library holding the socket waits on it.
                    let stop = up.stop_signal();
                    let (mut stream, _) = up.into_parts();
                    stop.await;
                    let _ = stream.write_all(b"bye").await;
                })
                .with_header("upgrade", "echo")
                .with_header("connection", "upgrade")
            }
        })
        .get("/stubborn", |req: Request| async move {
            Response::upgrade(&req, |_up| std::future::pending())
                .with_header("upgrade", "echo")
                .with_header("connection", "upgrade")
        })
}

fn config(bulk_writers: usize) -> ServerConfig {
    let mut c = ServerConfig::default();
    c.bulk_writers = bulk_writers;
    c
}

/// Reads a response head (through the blank line) and whatever came after it in the same reads.
fn read_head(s: &mut TcpStream) -> (String, Vec<u8>) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = got.split_off(i + 4);
            return (String::from_utf8_lossy(&got).into_owned(), rest);
        }
        let n = s.read(&mut buf).expect("reading a head");
        assert!(n > 0, "closed before a whole head: {got:?}");
        got.extend_from_slice(&buf[..n]);
    }
}

/// Reads until `want` bytes have arrived after `have`.
fn read_exactly(s: &mut TcpStream, mut have: Vec<u8>, want: usize) -> Vec<u8> {
    let mut buf = [0u8; 4096];
    while have.len() < want {
        let n = s.read(&mut buf).expect("reading upgraded bytes");
        assert!(n > 0, "closed after {have:?}");
        have.extend_from_slice(&buf[..n]);
    }
    have
}

fn for_both(test: impl Fn(usize)) {
    for bulk in [0, 1] {
        test(bulk);
    }
}

#[test]
fn the_101_head_carries_the_handlers_headers_and_no_body_then_bytes_go_both_ways() {
    for_both(|bulk| {
        let calls = Arc::new(AtomicUsize::new(0));
        let server = TestServer::start(router(calls.clone()), config(bulk));
        let mut s = server.connect();
        s.write_all(UPGRADE).unwrap();
        let (head, rest) = read_head(&mut s);
        assert!(
            head.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
            "{head:?}"
        );
        for h in [
            "upgrade: echo\r\n",
            "connection: upgrade\r\n",
            "sec-websocket-accept: token\r\n",
            "date: ",
        ] {
            assert!(head.contains(h), "no {h:?} in {head:?}");
        }
        for h in ["content-length", "transfer-encoding", "connection: close"] {
            assert!(!head.contains(h), "{h:?} in {head:?}");
        }
        assert!(rest.is_empty(), "a body after the 101: {rest:?}");
        for msg in [&b"ping"[..], b"and again, longer"] {
            s.write_all(msg).unwrap();
            assert_eq!(read_exactly(&mut s, Vec::new(), msg.len()), msg);
        }
        s.shutdown(std::net::Shutdown::Write).unwrap();
        assert_eq!(read_to_close(&mut s), "");
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn bytes_sent_with_the_request_reach_the_new_owner() {
    for_both(|bulk| {
        let server = TestServer::start(router(Arc::default()), config(bulk));
        let mut s = server.connect();
        let mut sent = UPGRADE.to_vec();
        sent.extend_from_slice(b"early bytes");
        s.write_all(&sent).unwrap();
        let (head, rest) = read_head(&mut s);
        assert_eq!(status_of(&head), 101, "{head:?}");
        assert_eq!(read_exactly(&mut s, rest, 11), b"early bytes");
        s.write_all(b"later").unwrap();
        assert_eq!(read_exactly(&mut s, Vec::new(), 5), b"later");
    });
}

#[test]
fn a_connection_serves_requests_before_it_is_upgraded() {
    for_both(|bulk| {
        let server = TestServer::start(router(Arc::default()), config(bulk));
        let mut s = server.connect();
        s.write_all(b"GET /hello HTTP/1.1\r\nhost: t\r\n\r\n")
            .unwrap();
        let (head, rest) = read_head(&mut s);
        assert_eq!(status_of(&head), 200, "{head:?}");
        assert_eq!(read_exactly(&mut s, rest, 5), b"hello");
        // A streamed body: with bulk writers the connection goes to them and comes back.
        s.write_all(b"GET /stream HTTP/1.1\r\nhost: t\r\n\r\n")
            .unwrap();
        let (head, rest) = read_head(&mut s);
        assert!(head.contains("transfer-encoding: chunked"), "{head:?}");
        let body = b"1\r\na\r\n1\r\nb\r\n0\r\n\r\n";
        assert_eq!(read_exactly(&mut s, rest, body.len()), body);
        s.write_all(UPGRADE).unwrap();
        let (head, rest) = read_head(&mut s);
        assert_eq!(status_of(&head), 101, "{head:?}");
        s.write_all(b"echoed").unwrap();
        assert_eq!(read_exactly(&mut s, rest, 6), b"echoed");
    });
}

#[test]
fn an_upgrade_the_request_did_not_ask_for_is_a_500() {
    for_both(|bulk| {
        let calls = Arc::new(AtomicUsize::new(0));
        let server = TestServer::start(router(calls.clone()), config(bulk));
        for req in [
            &b"GET /unasked HTTP/1.1\r\nhost: t\r\n\r\n"[..],
            b"GET /unasked HTTP/1.1\r\nhost: t\r\nupgrade: echo\r\n\r\n",
            b"GET /unasked HTTP/1.0\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n",
            b"HEAD /unasked HTTP/1.1\r\nhost: t\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n",
        ] {
            // The server closes after its answer.
            let r = server.raw(req);
            assert_eq!(status_of(&r), 500, "{r:?}");
            assert!(r.contains("connection: close\r\n"), "{r:?}");
        }
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        // Other connections are still served, upgrades too.
        let r = server.raw(b"GET /hello HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
        assert_eq!(status_of(&r), 200, "{r:?}");
        let mut s = server.connect();
        s.write_all(UPGRADE).unwrap();
        assert_eq!(status_of(&read_head(&mut s).0), 101);
    });
}

#[test]
fn a_request_that_did_not_ask_is_not_upgraded_by_a_checking_handler() {
    let server = TestServer::start(router(Arc::default()), config(0));
    let r = server.raw(b"GET /echo HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    assert_eq!(status_of(&r), 426, "{r:?}");
}

#[test]
fn stopping_completes_when_the_server_shuts_down() {
    for_both(|bulk| {
        let calls = Arc::new(AtomicUsize::new(0));
        let mut server = TestServer::start(router(calls.clone()), config(bulk));
        let mut s = server.connect();
        s.write_all(
            b"GET /bye HTTP/1.1\r\nhost: t\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n",
        )
        .unwrap();
        let (head, rest) = read_head(&mut s);
        assert_eq!(status_of(&head), 101, "{head:?}");
        assert!(rest.is_empty(), "{rest:?}");
        server.begin_stop();
        let mut after = Vec::new();
        s.read_to_end(&mut after).unwrap();
        assert_eq!(after, b"bye");
        assert_eq!(server.stop().aborted, 0);
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    });
}

#[test]
fn an_owner_that_ignores_shutdown_is_aborted_at_the_grace_deadline() {
    let mut config = config(0);
    config.shutdown_grace = Duration::from_millis(100);
    let server = TestServer::start(router(Arc::default()), config);
    let mut s = server.connect();
    s.write_all(
        b"GET /stubborn HTTP/1.1\r\nhost: t\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\n",
    )
    .unwrap();
    assert_eq!(status_of(&read_head(&mut s).0), 101);
    assert_eq!(server.stop().aborted, 1);
    s.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    assert_eq!(read_to_close(&mut s), "");
}

/// The statuses of the exchanges reported, and connections opened minus ended.
#[derive(Debug, Default)]
struct Statuses(Mutex<(Vec<u16>, i64)>);

impl Observer for Statuses {
    fn exchange(&self, e: &Exchange<'_>) {
        self.0.lock().unwrap().0.push(e.status);
    }

    fn connection(&self, opened: bool) {
        self.0.lock().unwrap().1 += if opened { 1 } else { -1 };
    }
}

#[test]
fn the_observer_sees_the_101_and_the_connection_open_until_its_owner_returns() {
    let seen = Arc::new(Statuses::default());
    let server = TestServer::start_observed(router(Arc::default()), config(0), seen.clone());
    let mut s = server.connect();
    s.write_all(UPGRADE).unwrap();
    assert_eq!(status_of(&read_head(&mut s).0), 101);
    // The 101 is reported before the owner is called, so before it echoes.
    s.write_all(b"x").unwrap();
    assert_eq!(read_exactly(&mut s, Vec::new(), 1), b"x");
    assert_eq!(*seen.0.lock().unwrap(), (vec![101], 1));
    s.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(read_to_close(&mut s), "");
    assert!(common::wait_for(READ_TIMEOUT, || seen.0.lock().unwrap().1 == 0));
}
