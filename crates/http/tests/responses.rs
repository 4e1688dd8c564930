//! The public surface: keep-alive, pipelining, bodies in and out, streams, files, write policy,
//! traces, graceful shutdown.

mod common;

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use common::{Probes, STREAM_CHUNK, TestServer, read_to_close, status_of, test_router, wait_for};
use galleon_client::Client;
use galleon_http::{
    Body, IoList, Request, Response, ServerConfig, TRACE_HEADER, TRACE_PATH_PREFIX, WritePolicy,
};

fn start(config: ServerConfig) -> (TestServer, Arc<Probes>) {
    let probes = Arc::new(Probes::default());
    (
        TestServer::start(test_router(probes.clone(), None), config),
        probes,
    )
}

/// A server that records traces and mounts the trace route.
fn start_traced(config: ServerConfig) -> (TestServer, Arc<Probes>) {
    let probes = Arc::new(Probes::default());
    (
        TestServer::start_traced(test_router(probes.clone(), None), config),
        probes,
    )
}

fn client(s: &TestServer) -> Client {
    Client::connect(s.addr, common::READ_TIMEOUT).unwrap()
}

#[test]
fn keep_alive_serves_many_requests_on_one_connection() {
    let (s, _) = start(ServerConfig::default());
    let mut c = client(&s);
    for i in 0..50 {
        let r = c.get(&format!("/big?n={}", i % 7), &[]).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), (i % 7) * 1000);
        assert_eq!(
            r.header("content-length"),
            Some(&*((i % 7) * 1000).to_string())
        );
        assert!(r.header("date").is_some_and(|d| d.ends_with(" GMT")));
    }
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let (s, _) = start(ServerConfig::default());
    let mut req = Vec::new();
    for n in [3, 1, 2] {
        req.extend_from_slice(format!("GET /big?n={n} HTTP/1.1\r\nhost: t\r\n\r\n").as_bytes());
    }
    req.extend_from_slice(b"POST /echo HTTP/1.1\r\nhost: t\r\ncontent-length: 5\r\n\r\nhello");
    req.extend_from_slice(b"GET /hello HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    let r = s.raw(&req);
    let statuses: Vec<usize> = r.match_indices("HTTP/1.1 200 OK").map(|(i, _)| i).collect();
    assert_eq!(statuses.len(), 5, "{r}");
    let lens: Vec<&str> = r
        .split("content-length: ")
        .skip(1)
        .map(|s| s.split("\r\n").next().unwrap())
        .collect();
    assert_eq!(lens, ["3000", "1000", "2000", "5", "5"]);
    assert!(r.ends_with("hello"));
}

#[test]
fn post_bodies_content_length_and_chunked() {
    let (s, _) = start(ServerConfig::default());
    let mut c = client(&s);
    let body: Vec<u8> = (0..100_000u32).map(|i| (i % 256) as u8).collect();
    let r = c.request("POST", "/echo", &[], &body).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, body);
    // Chunked, with an extension and a trailer, in several writes.
    let mut raw = s.connect();
    raw.write_all(b"POST /echo HTTP/1.1\r\nhost: t\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n5;ext=1\r\nhello\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(50));
    raw.write_all(b"6\r\n world\r\n0\r\nx-trailer: yes\r\n\r\n")
        .unwrap();
    let r = read_to_close(&mut raw);
    assert_eq!(status_of(&r), 200, "{r}");
    assert!(r.contains("x-len: 11\r\n"), "{r}");
    assert!(r.ends_with("hello world"), "{r}");
}

#[test]
fn expect_100_continue_is_answered_before_the_body() {
    let (s, _) = start(ServerConfig::default());
    let mut c = s.connect();
    c.write_all(b"POST /echo HTTP/1.1\r\nhost: t\r\nexpect: 100-continue\r\ncontent-length: 4\r\nconnection: close\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 25];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"HTTP/1.1 100 Continue\r\n\r\n");
    c.write_all(b"ping").unwrap();
    let r = read_to_close(&mut c);
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    assert!(r.ends_with("ping"));
}

#[test]
fn head_gets_the_length_but_no_body() {
    let (s, _) = start(ServerConfig::default());
    let r = s.raw(b"HEAD /big?n=4 HTTP/1.1\r\nhost: t\r\n\r\nGET /hello HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    let (first, rest) = r.split_once("\r\n\r\n").unwrap();
    assert!(first.contains("content-length: 4000"), "{first}");
    assert!(
        rest.starts_with("HTTP/1.1 200 OK"),
        "HEAD sent a body: {rest:?}"
    );
}

#[test]
fn http10_closes_unless_asked_to_keep_alive() {
    let (s, _) = start(ServerConfig::default());
    let r = s.raw(b"GET /hello HTTP/1.0\r\n\r\n");
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    assert!(r.contains("connection: close"), "{r}");
    let mut c = s.connect();
    c.write_all(
        b"GET /hello HTTP/1.0\r\nconnection: keep-alive\r\n\r\nGET /hello HTTP/1.0\r\n\r\n",
    )
    .unwrap();
    let r = read_to_close(&mut c);
    assert_eq!(r.matches("HTTP/1.1 200 OK").count(), 2, "{r}");
    assert!(r.contains("connection: keep-alive"), "{r}");
    // A stream to an HTTP/1.0 client is not chunked: it ends with the connection.
    let r = s.raw(b"GET /stream?n=2 HTTP/1.0\r\n\r\n");
    assert!(!r.contains("transfer-encoding"), "{}", &r[..200]);
    assert_eq!(r.split_once("\r\n\r\n").unwrap().1.len(), 2 * STREAM_CHUNK);
}

#[test]
fn streams_are_chunked_and_complete() {
    let (s, probes) = start(ServerConfig::default());
    let mut c = client(&s);
    let r = c.get("/stream?n=5", &[]).unwrap();
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.body.len(), 5 * STREAM_CHUNK);
    assert!(r.body.iter().all(|&b| b == b'd'));
    assert_eq!(probes.chunks.load(Ordering::SeqCst), 5);
    // The connection is still usable after a chunked response.
    assert_eq!(c.get("/hello", &[]).unwrap().body, b"hello");
}

#[test]
fn a_fast_readers_stream_comes_whole_when_its_chunks_are_batched() {
    // A 4 KiB floor: a reader taking over 8 MB/s earns the raised bound after 8 MiB, and from
    // then on the chunks that are ready go out several to a write. Every chunk must still
    // come, framed and in order, and the connection go on after the stream ends in a batch.
    // Chunks computed inline (as galleon serve's templates): the next one is always ready.
    let mut config = ServerConfig::default();
    config.limits.stream_unsent_bytes = 4096;
    let pool = galleon_offload::Pool::new(galleon_offload::Config {
        threads: 1,
        policy: galleon_offload::Policy::Inline,
        ..galleon_offload::Config::default()
    })
    .unwrap();
    let probes = Arc::new(Probes::default());
    let s = TestServer::start_offloaded(test_router(probes.clone(), None), config, pool);
    let mut c = client(&s);
    for n in [600, 601] {
        probes.chunks.store(0, Ordering::SeqCst);
        let r = c.get(&format!("/stream?n={n}"), &[]).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.body.len(), n * STREAM_CHUNK);
        assert!(r.body.iter().all(|&b| b == b'd'));
        assert_eq!(probes.chunks.load(Ordering::SeqCst), n);
    }
    assert_eq!(c.get("/hello", &[]).unwrap().body, b"hello");
}

#[test]
fn an_empty_chunk_in_a_batch_does_not_end_the_body() {
    // An empty chunk framed as one would be the body's last chunk: a batch must skip it, as a
    // lone chunk is skipped.
    let mut config = ServerConfig::default();
    config.limits.stream_unsent_bytes = 4096;
    let pool = galleon_offload::Pool::new(galleon_offload::Config {
        threads: 1,
        policy: galleon_offload::Policy::Inline,
        ..galleon_offload::Config::default()
    })
    .unwrap();
    let router = galleon_http::Router::new().get("/gaps", |_r: Request| async {
        let it = (0..1200).map(|i| {
            let mut l = IoList::new();
            if i % 2 == 0 {
                l.push_bytes(Bytes::from(vec![b'g'; STREAM_CHUNK]));
            }
            Ok::<_, std::io::Error>(l)
        });
        Response::html(Body::iter(it))
    });
    let s = TestServer::start_offloaded(router, config, pool);
    let mut c = client(&s);
    let r = c.get("/gaps", &[]).unwrap();
    assert_eq!(r.body.len(), 600 * STREAM_CHUNK);
    assert!(r.body.iter().all(|&b| b == b'g'));
}

#[test]
fn a_client_that_disconnects_stops_the_stream() {
    let (s, probes) = start(ServerConfig::default());
    let mut c = s.connect();
    // Asks for 1,000,000 chunks of 64 KiB (64 GB): only a bounded number may ever be rendered.
    c.write_all(b"GET /stream?n=1000000 HTTP/1.1\r\nhost: t\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0;
    while got < 4 * STREAM_CHUNK {
        got += galleon_client::read_some(&mut c, &mut buf).unwrap();
    }
    drop(c);
    // Once the server notices (its next writes fail), production stops.
    assert!(wait_for(Duration::from_secs(5), || {
        let a = probes.chunks.load(Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(200));
        a == probes.chunks.load(Ordering::SeqCst)
    }));
    let produced = probes.chunks.load(Ordering::SeqCst);
    // What the client read, plus what fits in the two sockets' buffers (a few MB on loopback),
    // plus the chunk being written when the reset arrived and the two the producer may have
    // computed ahead (one queued, one blocked on the queue).
    assert!(
        produced < 200,
        "rendered {produced} chunks for a client that read {got} bytes"
    );
    s.assert_alive();
}

#[test]
fn an_idle_event_stream_is_dropped_when_the_client_leaves() {
    let (s, probes) = start(ServerConfig::default());
    let mut c = s.connect();
    c.write_all(b"GET /sse HTTP/1.1\r\nhost: t\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 4096];
    let mut got = String::new();
    while !got.contains("data: hello") {
        let n = galleon_client::read_some(&mut c, &mut buf).unwrap();
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(got.contains("transfer-encoding: chunked"));
    assert!(!probes.sse_dropped.load(Ordering::SeqCst));
    drop(c);
    assert!(
        wait_for(Duration::from_secs(5), || probes
            .sse_dropped
            .load(Ordering::SeqCst)),
        "the stream outlived its client"
    );
}

#[test]
fn files_are_sent_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.bin");
    let data: Vec<u8> = (0..1_000_003u32).map(|i| (i * 31 % 253) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let config = ServerConfig::default();
    let s = TestServer::start_traced(test_router(Arc::new(Probes::default()), Some(path)), config);
    let mut c = client(&s);
    let r = c.get("/file", &[(TRACE_HEADER, "file1")]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body, data);
    let t = c
        .get(&format!("{TRACE_PATH_PREFIX}file1"), &[])
        .unwrap()
        .text();
    assert!(t.contains("\nsendfile fd="), "{t}");
    let sent: u64 = t
        .lines()
        .filter(|l| l.starts_with("sendfile"))
        .map(|l| {
            l.split("bytes=")
                .nth(1)
                .unwrap()
                .split(' ')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(sent, data.len() as u64, "{t}");
}

#[test]
fn traces_match_the_write_policy() {
    let mut config = ServerConfig::default();
    config.write_policy = WritePolicy::vectored();
    let (s, _) = start_traced(config);
    let mut c = client(&s);
    // 100 segments of 1000 bytes + the head (one scratch run): vectored sends 101 iovecs and
    // copies nothing.
    let r = c.get("/big?n=100", &[(TRACE_HEADER, "v1")]).unwrap();
    assert_eq!(r.body.len(), 100_000);
    let t = c
        .get(&format!("{TRACE_PATH_PREFIX}v1"), &[])
        .unwrap()
        .text();
    assert!(t.starts_with("# GET /big?n=100 -> 200\n"), "{t}");
    let first = t.lines().nth(1).unwrap();
    assert!(first.starts_with("writev fd="), "{first}");
    assert!(first.contains(" iovcnt=101 "), "{first}");
    assert_eq!(
        t.lines().filter(|l| l.starts_with("  [")).count(),
        101,
        "{t}"
    );
    // Every body segment points at the same static 1000-byte text.
    let addrs: std::collections::HashSet<&str> = t
        .lines()
        .filter(|l| l.contains(" len=1000 "))
        .map(|l| l.split("addr=").nth(1).unwrap().split(' ').next().unwrap())
        .collect();
    assert_eq!(addrs.len(), 1, "{t}");
    let summary = t.lines().last().unwrap();
    assert!(
        summary.starts_with("summary: syscalls=1 iovecs=101 "),
        "{summary}"
    );
    assert!(summary.contains(" copied=0 "), "{summary}");

    // An unknown token is a 404; an untraced request records nothing.
    assert_eq!(
        c.get(&format!("{TRACE_PATH_PREFIX}nope"), &[])
            .unwrap()
            .status,
        404
    );
}

#[test]
fn flatten_policy_copies_everything_into_one_iovec() {
    let mut config = ServerConfig::default();
    config.write_policy = WritePolicy::flatten();
    let (s, _) = start_traced(config);
    let mut c = client(&s);
    let r = c.get("/big?n=10", &[(TRACE_HEADER, "f")]).unwrap();
    assert_eq!(r.body.len(), 10_000);
    let t = c.get(&format!("{TRACE_PATH_PREFIX}f"), &[]).unwrap().text();
    let first = t.lines().nth(1).unwrap();
    assert!(first.contains(" iovcnt=1 "), "{t}");
    assert!(t.contains(" referenced=0 "), "{t}");
}

#[test]
fn trace_endpoint_is_off_by_default() {
    let (s, _) = start(ServerConfig::default());
    let mut c = client(&s);
    c.get("/hello", &[(TRACE_HEADER, "x")]).unwrap();
    assert_eq!(
        c.get(&format!("{TRACE_PATH_PREFIX}x"), &[]).unwrap().status,
        404
    );
}

#[test]
fn graceful_shutdown_finishes_in_flight_and_refuses_new() {
    let (mut s, probes) = start(ServerConfig::default());
    let addr = s.addr;
    let mut busy = s.connect();
    busy.write_all(b"GET /slow HTTP/1.1\r\nhost: t\r\n\r\n")
        .unwrap();
    let idle = s.connect();
    std::thread::sleep(Duration::from_millis(150));
    s.begin_stop();
    let r = read_to_close(&mut busy);
    assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
    assert!(r.contains("connection: close"), "{r}");
    assert!(r.ends_with("slow done"));
    assert_eq!(probes.slow_done.load(Ordering::SeqCst), 1);
    let mut idle = idle;
    assert_eq!(
        read_to_close(&mut idle),
        "",
        "idle connection closed without a response"
    );
    let summary = s.stop();
    assert_eq!(summary.aborted, 0);
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "listener still open"
    );
}

#[test]
fn shutdown_closes_a_keep_alive_connection_idle_after_its_requests() {
    let (mut s, _) = start(ServerConfig::default());
    let mut c = s.connect();
    // Three requests on one keep-alive connection, each response read whole (1000-byte body).
    for _ in 0..3 {
        c.write_all(b"GET /big?n=1 HTTP/1.1\r\nhost: t\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n")
            || got.len() < got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4 + 1000
        {
            let n = galleon_client::read_some(&mut c, &mut buf).unwrap();
            assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        assert!(got.starts_with(b"HTTP/1.1 200 OK"));
    }
    // The connection now waits for a fourth request: shutdown must close it at once (the
    // client reads end-of-stream), not leave it to the idle timeout or the grace period.
    let started = std::time::Instant::now();
    s.begin_stop();
    let mut buf = [0u8; 64];
    assert_eq!(
        galleon_client::read_some(&mut c, &mut buf).unwrap(),
        0,
        "closed without a response"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let summary = s.stop();
    assert_eq!(
        summary.aborted, 0,
        "the idle connection was aborted, not closed"
    );
}

/// Regression (issue 13, class 1): each computed stream (a template render) held a blocking
/// thread while its socket was full, so a few hundred slow readers took tokio's whole blocking
/// pool and everything else that needs it (static files, SQLite reads, other streams) stopped.
/// Here the pool has 2 threads and 8 clients never read their endless streams: a ninth stream
/// must still be answered.
#[test]
fn slow_readers_of_streams_hold_no_blocking_thread() {
    let s = TestServer::start_with_blocking_threads(
        test_router(Arc::new(Probes::default()), None),
        ServerConfig::default(),
        2,
    );
    let mut stalled = Vec::new();
    for _ in 0..8 {
        let mut c = s.connect();
        c.write_all(b"GET /stream?n=1000000 HTTP/1.1\r\nhost: t\r\n\r\n")
            .unwrap();
        stalled.push(c);
    }
    // Long enough for their socket buffers to fill and their producers to stall.
    std::thread::sleep(Duration::from_millis(800));
    let started = std::time::Instant::now();
    let r = client(&s).get("/stream?n=2", &[]).unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.body.len(), 2 * STREAM_CHUNK);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(stalled);
}

/// Regression (issue 13, class 11): `OPTIONS *` and absolute-form targets got 404.
#[test]
fn options_asterisk_and_absolute_targets_are_answered() {
    let (s, _) = start(ServerConfig::default());
    let r = s.raw(b"OPTIONS * HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    assert_eq!(status_of(&r), 200, "{r}");
    assert!(r.contains("allow: GET, HEAD, POST, OPTIONS"), "{r}");
    let r = s.raw(b"GET * HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    assert_eq!(status_of(&r), 400, "{r}");
    let r = s.raw(b"GET http://t/hello HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    assert_eq!(status_of(&r), 200, "{r}");
}

/// Regression (issue 13, class 4): the write timeout covered a whole file, so a download slower
/// than file size / timeout was cut however steadily it moved (2 GiB at 5 MB/s stopped at
/// 323 MB). It now covers progress: here a 16 MiB file read at about 5 MB/s takes three times
/// the 1 s write timeout and arrives whole.
#[test]
fn slow_but_steady_file_downloads_are_not_cut() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    let data: Vec<u8> = (0..16 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let mut config = ServerConfig::default();
    config.limits.write_timeout = Duration::from_secs(1);
    let s = TestServer::start(test_router(Arc::new(Probes::default()), Some(path)), config);
    let mut c = s.connect();
    c.write_all(b"GET /file HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .unwrap();
    let started = std::time::Instant::now();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // About 512 KiB per 100 ms.
        let mut this_tick = 0;
        while this_tick < 512 * 1024 {
            match galleon_client::read_some(&mut c, &mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    this_tick += n;
                }
                Err(e) => panic!("{e}"),
            }
        }
        if this_tick == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        started.elapsed() > Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let body_at = got.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert_eq!(got.len() - body_at, data.len(), "the whole file arrived");
    assert!(got[body_at..] == data[..]);
}

/// What a response holds (`Response::hold_until_sent`) is released once its body has been
/// written, not when the handler returns: the example site counts whole pages that slow
/// readers pin against a byte budget this way (issue 35, cause 8).
#[test]
fn what_a_response_holds_is_released_once_it_is_written() {
    struct Signal(std::sync::mpsc::Sender<()>);
    impl Drop for Signal {
        fn drop(&mut self) {
            let _ = self.0.send(());
        }
    }
    let (tx, released) = std::sync::mpsc::channel::<()>();
    let tx = std::sync::Mutex::new(tx);
    const BIG: usize = 32 << 20;
    let router =
        galleon_http::Router::new().get("/held", move |_req: Request| {
            let tx = tx.lock().unwrap().clone();
            async move {
                Response::html(IoList::from_scratch(vec![b'x'; BIG])).hold_until_sent(Signal(tx))
            }
        });
    let s = TestServer::start(router, ServerConfig::default());
    let mut c = s.connect();
    c.write_all(b"GET /held HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n")
        .unwrap();
    // 32 MiB is more than the two sockets' buffers take: while the client reads nothing, the
    // body cannot have been written, whatever the scheduler does.
    assert!(
        released.recv_timeout(Duration::from_millis(500)).is_err(),
        "released before the body was written"
    );
    let r = read_to_close(&mut c);
    assert_eq!(status_of(&r), 200);
    assert!(r.len() > BIG, "{} bytes", r.len());
    released
        .recv_timeout(Duration::from_secs(30))
        .expect("released once the body was written");
}
