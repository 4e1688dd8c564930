//! The HTTP tests' shared pieces: the API served in-process on either front end (galleon-http or
//! axum) over a fresh SQLite file or a PostgreSQL schema of its own, JSON calls, and a raw
//! server-sent-events subscriber that decodes the chunked body as it arrives.
//!
//! Every behaviour test is a `fn(Front)` listed in [`on_both_fronts!`], which makes it one
//! `#[test]` per front end: `name::galleon` and (feature `axum`) `name::axum`.
#![allow(dead_code, unreachable_pub)]

use std::io::Write;
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use galleon_client::Client;
use galleon_eventstore::{OpenOptions, Store};
use galleon_eventstore_http::{Access, ApiLimits, EventsApi};
use serde_json::{Value, json};

/// How long a test waits for an expected frame, state or answer before failing.
pub const WAIT: Duration = Duration::from_secs(30);

/// Which server runs the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Front {
    /// galleon-http's `Server` with `EventsApi::router`.
    Galleon,
    /// `axum::serve` with `EventsApi::axum_router`.
    Axum,
}

/// Makes each `fn name(front: Front)` listed one test per front end (`#[macro_use] mod support;`).
macro_rules! on_both_fronts {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn galleon() {
                    super::$name($crate::support::Front::Galleon)
                }

                #[cfg(feature = "axum")]
                #[test]
                fn axum() {
                    super::$name($crate::support::Front::Axum)
                }
            }
        )*
    };
}

/// How to configure the API under test.
#[derive(Debug, Clone, Default)]
pub struct Options {
    pub limits: ApiLimits,
    pub access: Access,
    pub keep_alive: Option<Duration>,
    /// A PostgreSQL URL and the schema to use in it, instead of a fresh SQLite file.
    pub postgres: Option<(String, String)>,
}

/// The API served on 127.0.0.1:0 by a front end on a thread and runtime of its own, until
/// stopped or dropped.
pub struct TestServer {
    pub addr: SocketAddr,
    /// The API being served (a clone: the same store, tokens and streams).
    pub api: EventsApi,
    pub front: Front,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    done: mpsc::Receiver<()>,
    thread: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl TestServer {
    pub fn start(front: Front) -> TestServer {
        TestServer::start_with(front, Options::default())
    }

    pub fn start_with(front: Front, options: Options) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let url = match &options.postgres {
            Some((url, _)) => url.clone(),
            None => format!("sqlite:{}/events.db", dir.path().display()),
        };
        let (ready_tx, ready_rx) = mpsc::channel();
        let (done_tx, done) = mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let open = OpenOptions {
                    pg_schema: options.postgres.as_ref().map(|(_, s)| s.clone()),
                    ..OpenOptions::default()
                };
                let store = Store::open_with(&url, open).await.unwrap();
                let mut api = EventsApi::new(store)
                    .with_limits(options.limits)
                    .with_access(options.access.clone());
                if let Some(k) = options.keep_alive {
                    api = api.with_keep_alive(k);
                }
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                ready_tx
                    .send((listener.local_addr().unwrap(), api.clone()))
                    .unwrap();
                serve(front, api, listener, async move {
                    let _ = stopped.await;
                })
                .await;
            });
            let _ = done_tx.send(());
        });
        let (addr, api) = ready_rx
            .recv_timeout(WAIT)
            .expect("the server did not start");
        TestServer {
            addr,
            api,
            front,
            stop: Some(stop),
            done,
            thread: Some(thread),
            _dir: dir,
        }
    }

    /// Begins shutdown and waits until the server has stopped (at most [`WAIT`]).
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.done
            .recv_timeout(WAIT)
            .expect("the server did not stop after its shutdown began");
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }

    pub fn client(&self) -> Client {
        client(self.addr)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
            // Open event streams end at shutdown on both front ends; a test that failed may have
            // left some, so do not wait forever for the thread.
            let _ = self.done.recv_timeout(WAIT);
        }
    }
}

/// Serves `api` on `listener` with the front end until `shutdown` completes.
async fn serve(
    front: Front,
    api: EventsApi,
    listener: tokio::net::TcpListener,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    match front {
        Front::Galleon => {
            // The server ends event streams at shutdown by itself: `api.shutdown()` is not
            // called, as `galleon serve` does not call it.
            let server =
                galleon_http::Server::new(api.router(), galleon_http::ServerConfig::default());
            server.serve(listener, shutdown).await.unwrap();
        }
        #[cfg(feature = "axum")]
        Front::Axum => {
            let app: axum::Router = api.axum_router();
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    shutdown.await;
                    api.shutdown();
                })
                .await
                .unwrap();
        }
        #[cfg(not(feature = "axum"))]
        Front::Axum => unreachable!("the axum tests need the `axum` feature"),
    }
}

/// `DATABASE_URL`, or `None` after saying loudly (past the test harness's capture) that `test`
/// was skipped.
pub fn database_url(test: &str) -> Option<String> {
    match std::env::var("DATABASE_URL") {
        Ok(url) => Some(url),
        Err(_) => {
            let _ = writeln!(
                std::io::stderr(),
                "\n*** SKIPPED: {test} (PostgreSQL): DATABASE_URL is not set ***\n"
            );
            None
        }
    }
}

/// A schema name no other run uses.
pub fn unique_schema(prefix: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{prefix}_{}_{nanos}", std::process::id())
}

/// Drops `schema` and everything in it.
pub fn drop_schema(url: &str, schema: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await
            .unwrap();
        drop(client);
        let _ = driver.await;
    });
}

/// Waits (at most [`WAIT`]) until `api` has exactly `n` event streams open.
pub fn wait_open_streams(api: &EventsApi, n: usize) {
    let mut open = api.watch_open_streams();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(WAIT, open.wait_for(|open| *open == n))
            .await
            .unwrap_or_else(|_| panic!("{} event streams open, not {n}", api.open_streams()))
            .unwrap();
    });
}

pub fn client(addr: SocketAddr) -> Client {
    Client::connect(addr, WAIT).unwrap()
}

/// A bearer token's header.
pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

/// Sends a request and parses the JSON answer; checks the content type.
pub fn call(
    c: &mut Client,
    method: &str,
    target: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, Value) {
    let r = c.request(method, target, headers, body).unwrap();
    assert_eq!(
        r.header("content-type"),
        Some("application/json"),
        "{method} {target}: {} {}",
        r.status,
        r.text()
    );
    let v = serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{e}: {}", r.text()));
    (r.status, v)
}

pub fn append(
    c: &mut Client,
    stream: &str,
    expected: Option<&str>,
    events: &Value,
) -> (u16, Value) {
    let headers: Vec<(&str, &str)> = expected
        .map(|v| ("ES-Expected-Version", v))
        .into_iter()
        .collect();
    call(
        c,
        "POST",
        &format!("/streams/{stream}"),
        &headers,
        events.to_string().as_bytes(),
    )
}

pub fn get(c: &mut Client, target: &str) -> (u16, Value) {
    call(c, "GET", target, &[], b"")
}

pub fn numbers(v: &Value, key: &str) -> Vec<u64> {
    v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e[key].as_u64().unwrap())
        .collect()
}

/// `n` events of type `ty`, data `{"n": i}`.
pub fn events(ty: &str, n: usize) -> Value {
    Value::Array(
        (0..n)
            .map(|i| json!({"type": ty, "data": {"n": i}, "metadata": {"by": "test"}}))
            .collect(),
    )
}

/// One server-sent-events frame.
#[derive(Debug, Default)]
pub struct Frame {
    pub id: Option<u64>,
    pub event: Option<String>,
    pub data: String,
    pub comments: Vec<String>,
}

/// A raw TCP subscriber to an event stream, decoding the chunked body as it arrives.
pub struct Subscriber {
    pub sock: TcpStream,
    pub head: String,
    pub raw: Vec<u8>,
    pub text: String,
    pub ended: bool,
}

impl Subscriber {
    pub fn open(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Subscriber {
        let mut sock = TcpStream::connect(addr).unwrap();
        let mut req =
            format!("GET {target} HTTP/1.1\r\nhost: test\r\naccept: text/event-stream\r\n");
        for (n, v) in headers {
            req.push_str(&format!("{n}: {v}\r\n"));
        }
        req.push_str("\r\n");
        sock.write_all(req.as_bytes()).unwrap();
        let mut s = Subscriber {
            sock,
            head: String::new(),
            raw: Vec::new(),
            text: String::new(),
            ended: false,
        };
        let deadline = Instant::now() + WAIT;
        let end = loop {
            if let Some(i) = s.raw.windows(4).position(|w| w == b"\r\n\r\n") {
                break i;
            }
            assert!(s.read_some(deadline), "no response head: {:?}", s.raw);
        };
        s.head = String::from_utf8(s.raw[..end].to_vec()).unwrap();
        s.raw.drain(..end + 4);
        s
    }

    /// Opens the stream and checks that it is one (200).
    pub fn open_ok(addr: SocketAddr, target: &str, headers: &[(&str, &str)]) -> Subscriber {
        let s = Subscriber::open(addr, target, headers);
        assert_eq!(s.status(), 200, "{target}: {}", s.head);
        s
    }

    pub fn status(&self) -> u16 {
        self.head.split(' ').nth(1).unwrap().parse().unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    /// Reads once into `raw`; false at end of file (or a reset: the server is gone).
    pub fn read_some(&mut self, deadline: Instant) -> bool {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "timed out; received so far: {:?}",
            self.text
        );
        self.sock.set_read_timeout(Some(left)).unwrap();
        let mut buf = [0u8; 16 * 1024];
        match galleon_client::read_some(&mut self.sock, &mut buf) {
            Ok(0) => false,
            Ok(n) => {
                self.raw.extend_from_slice(&buf[..n]);
                true
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => false,
            Err(e) => panic!("reading the stream: {e}; received so far: {:?}", self.text),
        }
    }

    /// Moves every complete chunk of `raw` into `text`.
    pub fn decode_chunks(&mut self) {
        while !self.ended {
            let Some(line_end) = self.raw.windows(2).position(|w| w == b"\r\n") else {
                return;
            };
            let size_line = std::str::from_utf8(&self.raw[..line_end]).unwrap();
            let size = usize::from_str_radix(size_line.trim(), 16).unwrap();
            let total = line_end + 2 + size + 2;
            if self.raw.len() < total {
                return;
            }
            let data = &self.raw[line_end + 2..line_end + 2 + size];
            self.text.push_str(std::str::from_utf8(data).unwrap());
            assert_eq!(&self.raw[total - 2..total], b"\r\n", "chunk framing");
            self.raw.drain(..total);
            if size == 0 {
                self.ended = true;
            }
        }
    }

    /// The next frame, or `None` once the stream has ended (the last chunk or a closed socket).
    pub fn next_frame(&mut self) -> Option<Frame> {
        let deadline = Instant::now() + WAIT;
        loop {
            self.decode_chunks();
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                return Some(parse_frame(&block));
            }
            if self.ended || !self.read_some(deadline) {
                return None;
            }
        }
    }

    /// The next frame that carries an event, skipping comments.
    pub fn next_event(&mut self) -> Frame {
        loop {
            let f = self.next_frame().expect("the stream ended");
            if f.id.is_some() {
                return f;
            }
        }
    }

    /// Reads on a thread of its own, sending each event's JSON, tagged `tag`, to `out` until
    /// the stream ends; returns a handle on the socket, to close it from the outside.
    pub fn forward(
        mut self,
        tag: &'static str,
        out: mpsc::Sender<(&'static str, Value)>,
    ) -> Closer {
        let sock = self.sock.try_clone().unwrap();
        let thread = std::thread::spawn(move || {
            loop {
                self.decode_chunks();
                while let Some(end) = self.text.find("\n\n") {
                    let block: String = self.text.drain(..end + 2).collect();
                    let f = parse_frame(&block);
                    if f.id.is_some()
                        && out
                            .send((tag, serde_json::from_str(&f.data).unwrap()))
                            .is_err()
                    {
                        return;
                    }
                }
                if self.ended {
                    return;
                }
                // No deadline: the test's receiving side has one; a closed socket ends this.
                self.sock.set_read_timeout(None).unwrap();
                let mut buf = [0u8; 16 * 1024];
                match galleon_client::read_some(&mut self.sock, &mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => self.raw.extend_from_slice(&buf[..n]),
                }
            }
        });
        Closer {
            sock,
            thread: Some(thread),
        }
    }
}

/// A forwarded subscriber's socket: dropping it closes the connection and ends the reader.
pub struct Closer {
    sock: TcpStream,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Closer {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn parse_frame(block: &str) -> Frame {
    let mut f = Frame::default();
    for line in block.lines() {
        if let Some(c) = line.strip_prefix(':') {
            f.comments.push(c.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("id: ") {
            f.id = Some(v.parse().unwrap());
        } else if let Some(v) = line.strip_prefix("event: ") {
            f.event = Some(v.to_owned());
        } else if let Some(v) = line.strip_prefix("data: ") {
            f.data.push_str(v);
        } else {
            assert!(line.is_empty(), "unexpected SSE line {line:?}");
        }
    }
    f
}
