//! The bulk writers: streamed bodies and large files are written on their own threads, the
//! connection comes back to the request workers afterwards, and shutdown closes what they are
//! still writing.

mod common;

use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::{Probes, READ_TIMEOUT, TestServer, read_to_close, test_router};
use futures::StreamExt;
use galleon_client::Client;
use galleon_http::{Body, IoList, Request, Response, Router, ServerConfig, StatusCode};

/// The names of the threads that polled a body's stream or ran a handler, in order.
type Seen = Arc<Mutex<Vec<String>>>;

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("").to_owned()
}

/// The calling thread's scheduling policy (field 41 of `/proc/thread-self/stat`; 5 is
/// `SCHED_IDLE`).
fn sched_policy() -> u32 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
    let after_name = stat.rsplit_once(')').unwrap().1;
    // Fields from the third on; the policy is the 41st.
    after_name
        .split_whitespace()
        .nth(41 - 3)
        .unwrap()
        .parse()
        .unwrap()
}

/// The common test routes (`/file` serves `file`), and `/polled`: three chunks from a stream
/// that notes the thread polling it; `/here`: a whole body from a handler that notes its
/// thread; `/policy`: the polling thread's scheduling policy; `/events`: an event stream that
/// never ends; `/endless`: a page that never ends.
fn router(seen: Seen, file: Option<std::path::PathBuf>) -> Router {
    let s1 = seen.clone();
    let s2 = seen;
    test_router(Arc::new(Probes::default()), file)
        .get("/polled", move |_r: Request| {
            let seen = s1.clone();
            async move {
                let chunks = futures::stream::iter(0..3).map(move |i| {
                    seen.lock().unwrap().push(thread_name());
                    Ok(IoList::from(format!("chunk {i};")))
                });
                Response::new(StatusCode::OK, Body::stream(chunks))
            }
        })
        .get("/here", move |_r: Request| {
            let seen = s2.clone();
            async move {
                seen.lock().unwrap().push(thread_name());
                Response::text(StatusCode::OK, "here")
            }
        })
        .get("/policy", |_r: Request| async {
            let policy =
                futures::stream::once(async { Ok(IoList::from(sched_policy().to_string())) });
            Response::new(StatusCode::OK, Body::stream(policy))
        })
        .get("/events", |_r: Request| async {
            let first = futures::stream::once(async { Ok(IoList::from("hello")) });
            Response::new(
                StatusCode::OK,
                Body::stream(first.chain(futures::stream::pending())),
            )
        })
        .get("/endless", |_r: Request| async {
            let chunk = Bytes::from(vec![b'e'; 64 * 1024]);
            let it = std::iter::repeat_with(move || {
                let mut l = IoList::new();
                l.push_bytes(chunk.clone());
                Ok::<_, std::io::Error>(l)
            });
            Response::new(StatusCode::OK, Body::iter(it))
        })
}

fn start(config: ServerConfig, file: Option<std::path::PathBuf>) -> (TestServer, Seen) {
    let seen = Seen::default();
    (TestServer::start(router(seen.clone(), file), config), seen)
}

#[test]
fn streamed_bodies_are_written_by_the_bulk_writers_and_the_connection_comes_back() {
    let (s, seen) = start(ServerConfig::default(), None);
    let mut c = Client::connect(s.addr, READ_TIMEOUT).unwrap();
    for _ in 0..3 {
        let r = c.get("/polled", &[]).unwrap();
        assert_eq!(r.status, 200);
        assert_eq!(r.text(), "chunk 0;chunk 1;chunk 2;");
        // The same connection, back on the request workers.
        assert_eq!(c.get("/here", &[]).unwrap().text(), "here");
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3 * 4, "{seen:?}");
    for round in seen.chunks(4) {
        assert!(
            round[..3].iter().all(|n| n == "galleon-bulk"),
            "stream polled on {round:?}"
        );
        assert_ne!(round[3], "galleon-bulk", "handler ran on {round:?}");
    }
}

#[test]
fn without_bulk_writers_streams_are_written_by_the_request_workers() {
    let mut config = ServerConfig::default();
    config.bulk_writers = 0;
    let (s, seen) = start(config, None);
    let mut c = Client::connect(s.addr, READ_TIMEOUT).unwrap();
    assert_eq!(
        c.get("/polled", &[]).unwrap().text(),
        "chunk 0;chunk 1;chunk 2;"
    );
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|n| n != "galleon-bulk"), "{seen:?}");
}

#[test]
fn bulk_writers_run_in_the_scheduling_class_asked_for() {
    // The stream's item is computed where it is polled: on a bulk writer.
    let policy_of = |config: ServerConfig| {
        let (s, _) = start(config, None);
        let mut c = Client::connect(s.addr, READ_TIMEOUT).unwrap();
        c.get("/policy", &[]).unwrap().text()
    };
    assert_eq!(
        policy_of(ServerConfig::default()),
        "0",
        "SCHED_OTHER by default"
    );
    let mut config = ServerConfig::default();
    config.bulk_priority = galleon_offload::Priority::Idle;
    assert_eq!(policy_of(config), "5", "SCHED_IDLE when asked");
}

#[test]
fn large_files_go_through_the_bulk_writers_whole_and_pipelining_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.bin");
    let data: Vec<u8> = (0..700_001u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    for threshold in [0, 1 << 20] {
        // 0: every file through the bulk writers; 1 MiB: this one on the request worker.
        let mut config = ServerConfig::default();
        config.bulk_file_bytes = threshold;
        let (s, _) = start(config, Some(path.clone()));
        let mut c = s.connect();
        c.write_all(
            b"GET /file HTTP/1.1\r\nhost: t\r\n\r\n\
              GET /file HTTP/1.1\r\nhost: t\r\n\r\n\
              GET /here HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n",
        )
        .unwrap();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        let head = "HTTP/1.1 200 OK\r\n";
        let mut rest = &got[..];
        for _ in 0..2 {
            assert!(rest.starts_with(head.as_bytes()), "threshold {threshold}");
            let end = rest.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
            let head_text = String::from_utf8_lossy(&rest[..end]).to_lowercase();
            assert!(head_text.contains("content-length: 700001"), "{head_text}");
            assert_eq!(
                &rest[end..end + data.len()],
                &data[..],
                "threshold {threshold}"
            );
            rest = &rest[end + data.len()..];
        }
        let last = String::from_utf8_lossy(rest);
        assert!(
            last.starts_with("HTTP/1.1 200 OK") && last.ends_with("here"),
            "{last}"
        );
    }
}

#[test]
fn shutdown_closes_a_download_the_bulk_writers_still_hold() {
    let mut config = ServerConfig::default();
    config.shutdown_grace = Duration::from_millis(300);
    let (mut s, _) = start(config, None);
    let mut c = s.connect();
    c.write_all(b"GET /endless HTTP/1.1\r\nhost: t\r\n\r\n")
        .unwrap();
    // Read a little, then stop reading: the writer waits for the socket.
    let mut buf = vec![0u8; 256 * 1024];
    let mut got = 0;
    while got < 256 * 1024 {
        got += galleon_client::read_some(&mut c, &mut buf).unwrap();
    }
    s.begin_stop();
    let started = Instant::now();
    let summary = s.stop();
    assert_eq!(summary.aborted, 1, "{summary:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    // The connection is closed: reading on ends (after what the kernel still held).
    let rest = read_to_close_bytes(&mut c);
    assert!(rest < 64 << 20, "{rest} more bytes");
}

/// Reads until the server closes (or resets) the connection; the number of bytes read.
fn read_to_close_bytes(c: &mut std::net::TcpStream) -> usize {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0;
    loop {
        match galleon_client::read_some(c, &mut buf) {
            Ok(0) | Err(_) => return n,
            Ok(k) => n += k,
        }
    }
}

#[test]
fn event_streams_on_the_bulk_writers_end_at_shutdown() {
    // An async stream (an event stream's kind) that never ends by itself: shutdown ends it at
    // once instead of letting it run out the 30 s grace.
    let (mut s, _) = start(ServerConfig::default(), None);
    let mut c = s.connect();
    c.write_all(b"GET /events HTTP/1.1\r\nhost: t\r\n\r\n")
        .unwrap();
    let mut got = String::new();
    let mut buf = [0u8; 1024];
    while !got.contains("hello") {
        let n = galleon_client::read_some(&mut c, &mut buf).unwrap();
        assert!(n > 0, "closed early: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    s.begin_stop();
    let started = Instant::now();
    let summary = s.stop();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(summary.aborted, 0, "{summary:?}");
    let rest = read_to_close(&mut c);
    assert!(
        rest.ends_with("0\r\n\r\n"),
        "the stream's last chunk: {rest:?}"
    );
}
